"""Validates real request and answer pairs against an OpenAPI 3.1 document
with openapi-core (an independent implementation), for OpenAPITests.

  openapi_pairs.py DOCUMENT.json PAIRS.json

PAIRS: [{"method", "path", "query": {k: v}, "content_type", "body",
         "status", "response_content_type", "response_body"}].
Prints one line per pair: "request ok|invalid: why", then "response ok|invalid: why".
"""
import json, sys
from openapi_core import Config, OpenAPI
from openapi_core.testing import MockRequest, MockResponse

spec = json.load(open(sys.argv[1]))
# RFC 9457's problem+json is JSON; openapi-core reads only application/json as such unless told.
api = OpenAPI.from_dict(spec, config=Config(extra_media_type_deserializers={"application/problem+json": json.loads}))
host = spec["servers"][0]["url"]
for pair in json.load(open(sys.argv[2])):
    request = MockRequest(host, pair["method"].lower(), pair["path"], args=pair.get("query") or {},
                          data=(pair.get("body") or "").encode(), content_type=pair.get("content_type") or "application/octet-stream")
    try:
        api.validate_request(request)
        verdict = "request ok"
    except Exception as error:
        verdict = "request invalid: " + str(error).split("\n")[0]
    response = MockResponse(pair["response_body"].encode(), status_code=pair["status"],
                            content_type=pair["response_content_type"] or "application/octet-stream")
    try:
        api.validate_response(request, response)
        verdict += " | response ok"
    except Exception as error:
        verdict += " | response invalid: " + str(error).split("\n")[0]
    print(verdict, flush=True)
