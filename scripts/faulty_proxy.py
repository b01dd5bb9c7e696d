#!/usr/bin/env python3
"""An HTTP proxy in front of an object store emulator that injects faults, for the
cloud tests (tests/it/cloud.rs): `object_store` must retry them, `bronze` must count the
retries, and a store that stays down must fail a run cleanly.

    faulty_proxy.py UPSTREAM [--port P] [--every K --faults N] [--down-after K --heal-file PATH] [--log PATH]

--every K --faults N   every K-th request fails, N in all, alternately with a
                       503 (SlowDown) and a connection dropped after the request was
                       read (mid-upload for a put), then all pass.
--down-after K         every request after the K-th gets a 503 until --heal-file exists.
--log PATH             appends `METHOD PATH?QUERY` of every request to PATH, one line
                       each, written before the request is forwarded (a test counts them).

Prints `listening on <port>` once ready; forwards everything else unchanged.
"""
import argparse
import http.client
import http.server
import os
import socket
import sys
import threading
import urllib.parse

parser = argparse.ArgumentParser()
parser.add_argument("upstream")
parser.add_argument("--every", type=int, default=0)
parser.add_argument("--faults", type=int, default=0)
parser.add_argument("--down-after", type=int, default=-1)
parser.add_argument("--heal-file")
parser.add_argument("--port", type=int, default=0)
parser.add_argument("--log")
args = parser.parse_args()
up = urllib.parse.urlsplit(args.upstream)
lock = threading.Lock()
state = {"requests": 0, "faults": 0}

SLOW_DOWN = (b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code>'
             b"<Message>Please reduce your request rate.</Message></Error>")


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def read_body(self):
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            body = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0], 16)
                if size == 0:
                    self.rfile.readline()
                    return body
                body += self.rfile.read(size)
                self.rfile.readline()
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def fault(self):
        with lock:
            state["requests"] += 1
            n = state["requests"]
            if args.down_after >= 0 and n > args.down_after:
                if not (args.heal_file and os.path.exists(args.heal_file)):
                    return "503"
            if args.every and state["faults"] < args.faults and n % args.every == 0:
                state["faults"] += 1
                return "drop" if state["faults"] % 2 == 0 else "503"
        return None

    def handle_any(self):
        body = self.read_body()
        if args.log:
            with lock, open(args.log, "a") as log:
                log.write(f"{self.command} {self.path}\n")
        fault = self.fault()
        if fault == "drop":
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        if fault == "503":
            self.send_response(503, "Slow Down")
            self.send_header("Content-Type", "application/xml")
            self.send_header("Content-Length", str(len(SLOW_DOWN)))
            self.end_headers()
            self.wfile.write(SLOW_DOWN)
            return
        conn = http.client.HTTPConnection(up.hostname, up.port, timeout=60)
        headers = {k: v for k, v in self.headers.items()
                   if k.lower() not in ("transfer-encoding", "connection")}
        if self.command not in ("GET", "HEAD", "DELETE") or body:
            headers["Content-Length"] = str(len(body))
        conn.request(self.command, self.path, body=body, headers=headers)
        resp = conn.getresponse()
        data = resp.read()
        self.send_response(resp.status, resp.reason)
        for k, v in resp.getheaders():
            if k.lower() in ("transfer-encoding", "connection", "content-length"):
                continue
            self.send_header(k, v)
        if self.command == "HEAD":
            self.send_header("Content-Length", resp.getheader("Content-Length", "0"))
        else:
            self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)
        conn.close()

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = handle_any


server = http.server.ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
server.daemon_threads = True
print(f"listening on {server.server_address[1]}", flush=True)
server.serve_forever()
