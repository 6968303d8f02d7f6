"""Print the integration-test executables of one package from `cargo --message-format=json`.

Reads cargo's JSON messages on stdin; prints one path per line for each compiled artifact
whose target is an integration test (`tests/*.rs`) of the package named in argv[1].
"""
import json
import sys

package = sys.argv[1]
for line in sys.stdin:
    try:
        message = json.loads(line)
    except json.JSONDecodeError:
        continue
    if message.get("reason") != "compiler-artifact" or not message.get("executable"):
        continue
    if "test" not in message["target"]["kind"]:
        continue
    # package_id reads "path+file:///…/crates/proxy#cswitch-proxy@0.1.0" (cargo ≥ 1.77).
    if f"#{package}@" not in message["package_id"]:
        continue
    print(message["executable"])
