"""An OTLP trace receiver for the tests, decoding with the official
opentelemetry-proto package: `otlp_receiver.py http|grpc` listens on
127.0.0.1 (a free port, printed first), then prints one JSON line per span
received, flushed at once."""
import json
import sys
from concurrent import futures
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.proto.trace.v1 import trace_pb2


def value(any_value):
    kind = any_value.WhichOneof("value")
    return getattr(any_value, kind) if kind else None


def report(request, transport, content_type):
    for resource_spans in request.resource_spans:
        resource = {kv.key: value(kv.value) for kv in resource_spans.resource.attributes}
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                print(json.dumps({
                    "transport": transport,
                    "content_type": content_type,
                    "resource": resource,
                    "scope": scope_spans.scope.name,
                    "trace_id": span.trace_id.hex(),
                    "span_id": span.span_id.hex(),
                    "parent_span_id": span.parent_span_id.hex(),
                    "name": span.name,
                    "kind": trace_pb2.Span.SpanKind.Name(span.kind),
                    "start": span.start_time_unix_nano,
                    "end": span.end_time_unix_nano,
                    "flags": span.flags,
                    "attributes": {kv.key: value(kv.value) for kv in span.attributes},
                    "status": trace_pb2.Status.StatusCode.Name(span.status.code),
                    "status_message": span.status.message,
                }, sort_keys=True), flush=True)


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        request = trace_service_pb2.ExportTraceServiceRequest()
        request.ParseFromString(body)
        report(request, "http:" + self.path, self.headers["Content-Type"])
        answer = trace_service_pb2.ExportTraceServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *args):
        pass


class TraceService(trace_service_pb2_grpc.TraceServiceServicer):
    def Export(self, request, context):
        metadata = dict(context.invocation_metadata())
        report(request, "grpc", metadata.get("content-type", "application/grpc"))
        return trace_service_pb2.ExportTraceServiceResponse()


if sys.argv[1] == "http":
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    print(server.server_address[1], flush=True)
    server.serve_forever()
else:
    import grpc
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(TraceService(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    print(port, flush=True)
    server.wait_for_termination()
