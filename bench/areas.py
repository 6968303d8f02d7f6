#!/usr/bin/env python3
"""Where a proxy's CPU goes, by area: the samples of `perf record` files grouped by what
their symbols do (kernel TCP/IP, sleeping and waking, io_uring, epoll, the system call
boundary; in user space parsing, the request phases, the ring driver, tokio, the allocator,
TLS, copies). One column per file, percent of its samples; a markdown table on stdout.

Usage: bench/areas.py LABEL=FILE.data [LABEL=FILE.data ...]
  (`bench/profile.sh --areas` and `PROTOCOLS_PERF=DIR python3 bench/protocols.py ...` write
  such files.)

The rules are prefix and substring matches on symbol names, first match wins; what none
matches is "other". They are coarse on purpose: a table that says where to look, not a
profile (`perf report -i FILE` is the profile).
"""
import collections
import re
import subprocess
import sys

KERNEL = [
    ("sleep, wake-up, scheduler", r"^(finish_task_switch|__schedule|schedule|_raw_spin_unlock_irq|try_to_wake_up|"
     r"ttwu|psi_|enqueue_|dequeue_|update_curr|pick_next|__switch_to|sched_|native_sched|select_task_rq|"
     r"__wake_up|wake_up|autoremove_wake|default_wake|__raw_callee_save___pv_queued)"),
    ("io_uring", r"^(__)?io_|^io_uring"),
    ("epoll", r"^(ep_|do_epoll|__x64_sys_epoll|__ep_)"),
    ("system call entry, descriptors", r"^(entry_SYSCALL|do_syscall|syscall_|exit_to_user|__x64_sys_|fget|fput|"
     r"__fget|__fdget|fdget|__fput|x64_sys_call|syscall_exit|__rseq)"),
    ("memory (slab, pages)", r"(slab|kmem_cache|kmalloc|kfree|__alloc_pages|free_unref|page_frag|"
     r"__free_pages|get_page_from_freelist|mod_memcg|__memcg|memcg_|obj_cgroup|refill_obj_stock)"),
    ("copies to and from user space", r"^(_copy_to_iter|_copy_from_iter|copy_user|rep_movs|__skb_datagram_iter|"
     r"skb_copy_datagram|copyout|copyin|simple_copy_to_iter|check_heap_object|__check_object_size)"),
    ("clock", r"^(read_tsc|ktime_get|native_read_tsc)"),
    ("TCP/IP, loopback", r"^(tcp|__tcp|ip_|__ip|ipv4|inet|__inet|skb|__skb|sk_|__sk|sock|__sock|net_|__net|netif|"
     r"__netif|dev_|__dev|loopback|process_backlog|__napi|napi|bbr_|validate_xmit|nf_|__nf|ipt_|raw_v4|"
     r"lock_sock|release_sock|bpf_|__cgroup_bpf|security_|selinux|apparmor|__local_bh|do_softirq|handle_softirqs|"
     r"__do_softirq|irq_exit|tcp_|kfree_skb|consume_skb|__kfree_skb|dst_|__build_skb|csum|__release_sock|"
     r"__x2apic|rb_|llist_|_raw_spin_lock_bh|__mod_timer|import_ubuf)"),
]
USER = [
    ("HTTP parsing and rewriting (cswitch_http1)", r"cswitch_http1::"),
    ("routing (rules, pick, decide)", r"(cswitch_rules::|proxy::http::route|proxy::upstream::(pick|decide)|"
     r"cswitch_balance::|proxy::floor::(schedulers|sched_slot|weights|group))"),
    ("the request's phases (proxy::http)", r"proxy::http::"),
    ("HTTP/2", r"(\bh2::|proxy::http2|hpack)"),
    ("TLS", r"(rustls|aws_lc|\bring::|libssl|libcrypto|ssl_|SSL_|ChaCha|aes_|gcm_|sha256|sha512|x25519|"
     r"ecp_nistz|bn_|fiat_|EVP_|tls::)"),
    ("ring driver (proxy::floor::uring)", r"proxy::floor::uring"),
    ("connections, tunnels, pools (proxy::upstream, proxy::floor)", r"proxy::(upstream|floor|accept|conn)"),
    ("stats and records (proxy::observe)", r"proxy::observe"),
    ("tokio runtime", r"tokio::"),
    ("allocator", r"(^_?mi_|mimalloc|^malloc|^free$|^_int_|^cfree|__libc_malloc|__libc_free|realloc)"),
    ("memcpy, memchr", r"(memmove|memcpy|memset|memchr|memcmp|__memc|__mems|__memm|strlen)"),
    ("clock (vDSO)", r"(clock_gettime|__vdso)"),
]


def samples(path):
    """(dso, symbol, percent) rows of one perf.data."""
    out = subprocess.run(["perf", "report", "-i", path, "--no-children", "--sort", "dso,sym", "--stdio",
                          "-g", "none", "--percent-limit", "0"], capture_output=True, text=True).stdout
    rows = []
    for line in out.splitlines():
        m = re.match(r"\s*([\d.]+)%\s+(\S+)\s+\[(.)\]\s+(.*)$", line)
        if m:
            rows.append((m.group(2), m.group(3), m.group(4).strip(), float(m.group(1))))
    return rows


def area(dso, mark, symbol):
    if mark == "k":
        for name, pattern in KERNEL:
            if re.search(pattern, symbol):
                return "kernel: " + name
        return "kernel: other"
    for name, pattern in USER:
        if re.search(pattern, symbol) or (name == "TLS" and re.search(r"lib(ssl|crypto)", dso)):
            return "user: " + name
    if not dso.startswith(("lib", "[")):
        return "user: other (the proxy's own code)"
    return "user: other (" + dso + ")"


def main():
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    columns = [a.split("=", 1) for a in sys.argv[1:]]
    table = {}
    for label, path in columns:
        shares = collections.Counter()
        for dso, mark, symbol, pct in samples(path):
            shares[area(dso, mark, symbol)] += pct
        table[label] = shares
    names = sorted({n for s in table.values() for n in s}, key=lambda n: (not n.startswith("kernel"), n))
    labels = [label for label, _ in columns]
    print("| area | " + " | ".join(labels) + " |")
    print("|---|" + "---|" * len(labels))
    for n in names:
        if max(table[l].get(n, 0) for l in labels) < 0.5:
            continue
        print(f"| {n} | " + " | ".join(f"{table[l].get(n, 0):.1f}" for l in labels) + " |")
    for side in ("kernel", "user"):
        total = [sum(v for k, v in table[l].items() if k.startswith(side)) for l in labels]
        print(f"| **all of {side} space** | " + " | ".join(f"**{t:.1f}**" for t in total) + " |")


if __name__ == "__main__":
    main()
