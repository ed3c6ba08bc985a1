"""Running the app under uvicorn: one process, or a supervisor and N workers on one socket.

What `uvicorn.run` does, with one fix: the shared socket of several workers says it is TCP.
"""

from __future__ import annotations

import contextlib
import socket

import uvicorn
from uvicorn.supervisors import Multiprocess

from kb.serve.config import ServeConfig

APP_FACTORY = "kb.serve.app:app_from_environment"  # imported by name in every worker


class TcpConfig(uvicorn.Config):
    """uvicorn.Config whose shared listening socket says it is TCP.

    With several workers uvicorn binds the socket itself, with `proto` 0; accepted connections
    inherit it, and asyncio turns TCP_NODELAY on only for IPPROTO_TCP, so every keep-alive answer
    after the first waited ~40 ms for the client's delayed ACK (uvicorn issue 3149: /healthz took
    44 ms with 2 workers, 2 ms with 1). Module level: workers receive the config pickled.
    """

    def bind_socket(self) -> socket.socket:
        sock = super().bind_socket()
        if sock.family in (socket.AF_INET, socket.AF_INET6) and sock.proto == 0:
            tcp = socket.socket(sock.family, sock.type, socket.IPPROTO_TCP, sock.detach())
            tcp.set_inheritable(True)
            return tcp
        return sock


def serve_forever(config: ServeConfig) -> bool:
    """Serve until interrupted; False if the server could not start (uvicorn said why)."""
    server_config = TcpConfig(
        APP_FACTORY,
        factory=True,
        host=config.host,
        port=config.port,
        workers=config.workers,
        server_header=False,
        # X-Forwarded-* only from a proxy on this machine (uvicorn's default), for https cookies.
        proxy_headers=True,
        timeout_graceful_shutdown=10,
    )
    if server_config.workers > 1:
        Multiprocess(server_config, sockets=[server_config.bind_socket()]).run()
        return True
    server = uvicorn.Server(server_config)
    with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C is how a person stops it
        server.run()
    return server.started
