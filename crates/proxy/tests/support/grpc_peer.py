"""A real gRPC server and client (grpcio) for crates/proxy/tests/grpc.rs.

No protoc: the service `demo.Echo` is served with grpcio's generic handlers, messages as
raw bytes. Every answer names the server that gave it.

  python3 grpc_peer.py serve NAME   # listens on 127.0.0.1:0, prints the port, serves
                                    # until its standard input closes
  python3 grpc_peer.py call ADDR [CA NAME]
                                    # runs every call through ADDR (over TLS when CA, the
                                    # certificate to trust, and NAME, the server name, are
                                    # given), prints one JSON object
"""

import json
import queue
import sys
import threading

import grpc

SERVICE = "demo.Echo"


def ident(b):
    return b


def handlers(name):
    def unary(req, ctx):
        ctx.set_trailing_metadata((("x-served-by", name),))
        return f"{name}:unary:{req.decode()}".encode()

    def server_stream(req, ctx):
        for i in range(3):
            yield f"{name}:ss{i}:{req.decode()}".encode()

    def client_stream(it, ctx):
        return f"{name}:cs:" + "+".join(m.decode() for m in it)

    def bidi(it, ctx):
        for m in it:
            yield f"{name}:bidi:{m.decode()}".encode()

    def fail(req, ctx):
        ctx.abort(grpc.StatusCode.NOT_FOUND, f"{name} has no {req.decode()}")

    def client_stream_encoded(it, ctx):
        return client_stream(it, ctx).encode()

    rpc = grpc
    methods = {
        "Unary": rpc.unary_unary_rpc_method_handler(unary, ident, ident),
        "ServerStream": rpc.unary_stream_rpc_method_handler(server_stream, ident, ident),
        "ClientStream": rpc.stream_unary_rpc_method_handler(client_stream_encoded, ident, ident),
        "Bidi": rpc.stream_stream_rpc_method_handler(bidi, ident, ident),
        "Fail": rpc.unary_unary_rpc_method_handler(fail, ident, ident),
        "Denied": rpc.unary_unary_rpc_method_handler(unary, ident, ident),
    }
    return grpc.method_handlers_generic_handler(SERVICE, methods)


def serve(name):
    from concurrent import futures

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
    server.add_generic_rpc_handlers((handlers(name),))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    print(port, flush=True)
    sys.stdin.read()  # until the test closes it (or ends)
    server.stop(0)


def status(e):
    return {"code": e.code().name, "details": e.details()}


def channel(addr, tls):
    if not tls:
        return grpc.insecure_channel(addr)
    ca, name = tls
    with open(ca, "rb") as f:
        creds = grpc.ssl_channel_credentials(root_certificates=f.read())
    return grpc.secure_channel(addr, creds, options=(("grpc.ssl_target_name_override", name),))


def call(addr, tls):
    out = {}
    with channel(addr, tls) as ch:
        path = lambda m: f"/{SERVICE}/{m}"
        unary = ch.unary_unary(path("Unary"), ident, ident)
        resp, c = unary.with_call(b"hi", timeout=10)
        out["unary"] = resp.decode()
        out["unary_trailers"] = dict(c.trailing_metadata())
        out["unary_code"] = c.code().name

        ss = ch.unary_stream(path("ServerStream"), ident, ident)
        out["server_stream"] = [m.decode() for m in ss(b"s", timeout=10)]

        cs = ch.stream_unary(path("ClientStream"), ident, ident)
        out["client_stream"] = cs(iter([b"a", b"b", b"c"]), timeout=10).decode()

        # Full duplex: each message is sent only after the answer to the one before came
        # back, so a switch that held either direction until the other ended would stall.
        bidi = ch.stream_stream(path("Bidi"), ident, ident)
        answers = queue.Queue()

        def ping_pong():
            for i in range(3):
                yield f"m{i}".encode()
                answers.get(timeout=5)

        got = []
        for m in bidi(ping_pong(), timeout=15):
            got.append(m.decode())
            answers.put(m)
        out["bidi"] = got

        for key, method in (("fail", "Fail"), ("denied", "Denied")):
            try:
                ch.unary_unary(path(method), ident, ident)(b"thing", timeout=10)
                out[key] = {"code": "OK"}
            except grpc.RpcError as e:
                out[key] = status(e)
        try:
            ch.unary_unary("/demo.Gone/Unary", ident, ident)(b"x", timeout=10)
            out["gone"] = {"code": "OK"}
        except grpc.RpcError as e:
            out["gone"] = status(e)
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "serve":
        serve(sys.argv[2])
    else:
        call(sys.argv[2], sys.argv[3:5])
