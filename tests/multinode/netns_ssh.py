#!/usr/bin/env python3
"""`ssh` for mpiexec's Hydra inside the two-host harness: `netns_ssh.py [-x] HOST COMMAND` runs COMMAND on HOST.

GT_NETNS_HOSTS (JSON) maps each host's address to the argv prefix that enters it
(netns.TwoHosts.command(i, [])); Hydra passes the remote command as one shell string.
"""
import json
import os
import sys


def main():
    args = [a for a in sys.argv[1:] if a != "-x"]
    host, command = args[0], " ".join(args[1:])
    prefix = json.loads(os.environ["GT_NETNS_HOSTS"])[host]
    os.execvp(prefix[0], [*prefix, "sh", "-c", command])


if __name__ == "__main__":
    main()
