"""A real SMTP server for the SMTP listener tests: aiosmtpd, printing each message it
accepts as one JSON line. Recipients whose local part starts with "reject" are refused.
Usage: aiosmtpd_server.py PORT NAME; prints READY, runs until stdin closes."""
import json
import sys

from aiosmtpd.controller import Controller


class Handler:
    def __init__(self, name):
        self.name = name

    async def handle_RCPT(self, server, session, envelope, address, rcpt_options):
        if address.startswith("reject"):
            return "550 5.1.1 no such user here"
        envelope.rcpt_tos.append(address)
        return "250 2.1.5 OK"

    async def handle_DATA(self, server, session, envelope):
        body = envelope.content.decode("utf8", errors="replace")
        line = {"server": self.name, "from": envelope.mail_from, "rcpts": envelope.rcpt_tos, "body": body}
        print(json.dumps(line), flush=True)
        return "250 2.0.0 queued at " + self.name


controller = Controller(Handler(sys.argv[2]), hostname="127.0.0.1", port=int(sys.argv[1]))
controller.start()
print("READY", flush=True)
sys.stdin.read()
controller.stop()
