"""A SOAP 1.1 user service built with spyne, the legacy upstream of the
answer-side wire tests: GetUser(id) answers a User, or a SOAP Fault (HTTP
500) for an unknown id. Prints its port, then logs each request's
SOAPAction and body as one JSON line."""
import io
import json
import logging
from datetime import datetime, timezone
from wsgiref.simple_server import WSGIRequestHandler, make_server

from spyne import Application, ComplexModel, DateTime, Fault, Integer, ServiceBase, Unicode, rpc
from spyne.model.complex import Array
from spyne.protocol.soap import Soap11
from spyne.server.wsgi import WsgiApplication


logging.disable(logging.CRITICAL)


class User(ComplexModel):
    __namespace__ = "urn:users"
    id = Integer
    name = Unicode
    tags = Array(Unicode)
    created = DateTime


class UserService(ServiceBase):
    @rpc(Integer, _returns=User)
    def GetUser(ctx, id):
        if id != 7:
            raise Fault(faultcode="Client", faultstring=f"no user {id}")
        return User(id=7, name="Ann <admin>", tags=["ops"], created=datetime(2024, 5, 1, 12, 30, tzinfo=timezone.utc))


application = WsgiApplication(Application([UserService], tns="urn:users", in_protocol=Soap11(validator="lxml"), out_protocol=Soap11()))


def logged(environ, start_response):
    length = int(environ.get("CONTENT_LENGTH") or 0)
    body = environ["wsgi.input"].read(length)
    print(json.dumps({"action": environ.get("HTTP_SOAPACTION"), "encoding": environ.get("HTTP_ACCEPT_ENCODING"),
                      "body": body.decode()}), flush=True)
    environ["wsgi.input"] = io.BytesIO(body)
    return application(environ, start_response)


class Quiet(WSGIRequestHandler):
    def log_message(self, *args):
        pass


server = make_server("127.0.0.1", 0, logged, handler_class=Quiet)
print(server.server_port, flush=True)
server.serve_forever()
