"""A TCP proxy that holds every chunk a client sends for ``delay`` seconds before passing it on: an
HTTP/1.1 client (one request per chunk, no pipelining) sees each request answered ``delay`` later,
as from a server that far away. Answers flow back at once. Runs its own asyncio loop in a thread.

    with latency_proxy("127.0.0.1", 8181, delay=0.030) as port:
        ...  # http://127.0.0.1:<port> is the server behind 30 ms

Closing the proxy closes its port and every connection through it (a server that went down)."""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager


async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, delay: float) -> None:
    try:
        while chunk := await reader.read(65536):
            if delay:
                await asyncio.sleep(delay)
            writer.write(chunk)
            await writer.drain()
    except (ConnectionError, asyncio.CancelledError):
        pass
    finally:
        writer.close()


class _Proxy:
    def __init__(self, host: str, port: int, delay: float) -> None:
        self.host, self.port, self.delay = host, port, delay
        self.tasks: set[asyncio.Task[None]] = set()

    async def handle(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        try:
            server_r, server_w = await asyncio.open_connection(self.host, self.port)
        except OSError:
            client_w.close()
            return
        for task in (
            asyncio.create_task(_pump(client_r, server_w, self.delay)),
            asyncio.create_task(_pump(server_r, client_w, 0.0)),
        ):
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)

    async def close(self) -> None:
        for task in list(self.tasks):
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)


@contextmanager
def latency_proxy(host: str, port: int, delay: float = 0.030) -> Iterator[int]:
    """Yields the proxy's port on 127.0.0.1 (chosen by the system), in front of ``host:port``."""
    loop = asyncio.new_event_loop()
    proxy = _Proxy(host, port, delay)
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    server = loop.run_until_complete(asyncio.start_server(proxy.handle, sock=listener, backlog=1024))
    thread = threading.Thread(target=loop.run_forever, name="latency-proxy", daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1]
    finally:

        async def stop() -> None:
            server.close()
            await proxy.close()
            await server.wait_closed()

        asyncio.run_coroutine_threadsafe(stop(), loop).result(timeout=10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)
        loop.close()
