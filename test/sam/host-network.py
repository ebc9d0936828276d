#!/usr/bin/env python3
"""SAM CLI's own command line (`sam local invoke ...`, as its `sam` entry point runs it), with one change: a Lambda
container given `--docker-network host` runs on the host's network, as the option says
(docs/contributing/invoking-locally.md#with-docker-sam).

SAM CLI 1.170 only skips connecting such a container to a network: it stays on the engine's default network, where
127.0.0.1 is the container's own (https://github.com/aws/aws-sam-cli/issues/4236), and on an engine without a
bridge (local/container-engine.ts) it has no network at all, so SAM cannot reach its runtime interface emulator.
Here the container gets the host's network instead of published ports, and the emulator listens on the port SAM
would have published (and the runtime API on a free one), so that containers side by side do not collide.

usage: host-network.py local invoke [sam's options]"""
import socket
import sys
import threading

from docker.models.containers import ContainerCollection
from samcli.cli.main import cli
from samcli.local.docker.container import Container

_create = Container.create
_make = ContainerCollection.create
_RIE = "/var/rapid/aws-lambda-rie"
_on_host = threading.local()


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def create(self, context):
    if self.network_id != "host" or not self._entrypoint or self._entrypoint[0] != _RIE:
        return _create(self, context)
    self._entrypoint = [
        *self._entrypoint,
        "--runtime-interface-emulator-address", f"127.0.0.1:{self.rapid_port_host}",
        "--runtime-api-address", f"127.0.0.1:{_free_port()}",
    ]
    _on_host.now = True
    try:
        return _create(self, context)
    finally:
        _on_host.now = False


def make(self, image, command=None, **kwargs):
    if getattr(_on_host, "now", False):
        # The host's network has no published ports: the emulator listens on the host's loopback itself.
        kwargs.pop("ports", None)
        kwargs["network_mode"] = "host"
    return _make(self, image, command, **kwargs)


Container.create = create
ContainerCollection.create = make

if __name__ == "__main__":
    sys.argv[0] = "sam"
    sys.exit(cli())
