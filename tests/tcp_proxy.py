"""A TCP proxy on 127.0.0.1 whose target can be switched: a managed Redis endpoint whose address stays while the
node behind it changes (a DNS flip, ElastiCache's primary endpoint after a failover).

Connections already open keep the node they were opened to; only new ones reach the new target, as with a
repointed DNS name. Threads, one pair per connection; `close` ends them all. Loopback only.
"""

from __future__ import annotations

import socket
import threading


class SwitchableProxy:
    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def switch(self, target_port: int) -> None:
        """New connections go to `target_port`; open ones stay where they are."""
        self.target_port = target_port

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target_port), timeout=5)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            with self._lock:
                self._sockets += [client, upstream]
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(source, sink), daemon=True).start()

    @staticmethod
    def _pipe(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for end in (source, sink):
                try:
                    end.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self) -> None:
        self._closed = True
        self._listener.close()
        with self._lock:
            for end in self._sockets:
                try:
                    end.close()
                except OSError:
                    pass
