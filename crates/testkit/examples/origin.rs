//! The test origin as a process, for benchmarks that need one in a network namespace
//! (`bench/oneway.py`): `origin NAME LISTEN_ADDR [UNIX_SOCKET]` answers on `LISTEN_ADDR`
//! and, given a Unix socket path, also takes connections passed there as descriptors
//! (`cswitch agent --pass-fd`). Runs until killed.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a tool: a bad argument ends it

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let usage = "usage: origin NAME LISTEN_ADDR [UNIX_SOCKET]";
    let (name, addr) = (args.get(1).expect(usage), args.get(2).expect(usage).parse().expect(usage));
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    rt.block_on(async {
        let _tcp = cswitch_testkit::Origin::start_on(name, addr).await.expect("bind");
        let _passed = match args.get(3) {
            Some(path) => {
                Some(cswitch_testkit::Origin::start_passed(name, path.as_ref()).await.expect("unix socket"))
            }
            None => None,
        };
        eprintln!("origin {name} on {addr}");
        std::future::pending::<()>().await;
    });
}
