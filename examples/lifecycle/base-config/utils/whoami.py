"""Prints '<instance group> <instance name>' of this node, found in resource_config.json
by this node's primary address (what AWS's base-config lifecycle scripts do)."""
import json
import socket
import subprocess
import sys

with open(sys.argv[1]) as f:
    config = json.load(f)
addresses = subprocess.run(["hostname", "-I"], capture_output=True, text=True).stdout.split()
for group in config["InstanceGroups"]:
    for inst in group.get("Instances") or []:
        if inst["CustomerIpAddress"] in addresses:
            print(group["Name"], inst["InstanceName"])
            sys.exit(0)
sys.exit("This instance not found in resource config (%s on %s)" % (addresses, socket.gethostname()))
