"""The socket several workers share hands out connections with Nagle's algorithm off."""

from __future__ import annotations

import asyncio
import socket

from kb.serve.server import TcpConfig
from tests.serve.conftest import free_port


def test_connections_on_the_workers_shared_socket_have_tcp_nodelay() -> None:
    # Without it every keep-alive answer after the first waits ~40 ms for a delayed ACK.
    config = TcpConfig("kb.serve.app:app_from_environment", host="127.0.0.1", port=free_port())
    listener = config.bind_socket()
    assert listener.proto == socket.IPPROTO_TCP

    async def accepted_nodelay() -> int:
        accepted: asyncio.Future[int] = asyncio.get_running_loop().create_future()

        class Probe(asyncio.Protocol):
            def connection_made(self, transport: asyncio.BaseTransport) -> None:
                sock = transport.get_extra_info("socket")
                accepted.set_result(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
                transport.close()

        server = await asyncio.get_running_loop().create_server(Probe, sock=listener)
        async with server:
            _reader, writer = await asyncio.open_connection(*listener.getsockname())
            result = await asyncio.wait_for(accepted, 5)
            writer.close()
            return result

    assert asyncio.run(accepted_nodelay()) == 1
