import Testing
@testable import Rewriter

@Suite struct MultipartTests {
    @Test func exactBytes() throws {
        let object = try JSONReader.parseObject(Array(
            "{\"title\":\"hé\",\"n\":1.0,\"ok\":true,\"tags\":[\"a\",\"b\"],\"u\":{\"x\":\"y\"},\"nil\":null,\"we\\\"ird\\r\\nname\":\"v\",\"f\":\"data:image/png;name=a%22b.png;base64,iVBORw==\",\"g\":{\"filename\":\"r.txt\",\"base64\":\"aGk\"}}".utf8))
        let encoder = MultipartEncoder(boundary: "BOUNDARY0123456789", options: QueryOptions())
        let body = String(decoding: encoder.encode(object, fileKeys: ["f", "g"]), as: UTF8.self)
        let expected = """
            --BOUNDARY0123456789\r
            Content-Disposition: form-data; name="title"\r
            \r
            hé\r
            --BOUNDARY0123456789\r
            Content-Disposition: form-data; name="n"\r
            \r
            1.0\r
            --BOUNDARY0123456789\r
            Content-Disposition: form-data; name="ok"\r
            \r
            1\r
            --BOUNDARY0123456789\r
            Content-Disposition: form-data; name="tags"\r
            \r
            a\r
            --BOUNDARY0123456789\r
            Content-Disposition: form-data; name="tags"\r
            \r
            b\r
            --BOUNDARY0123456789\r
            Content-Disposition: form-data; name="u[x]"\r
            \r
            y\r
            --BOUNDARY0123456789\r
            Content-Disposition: form-data; name="we%22ird%0D%0Aname"\r
            \r
            v\r
            --BOUNDARY0123456789\r
            Content-Disposition: form-data; name="f"; filename="a%22b.png"\r
            Content-Type: image/png\r
            \r
            \u{89}PNG\r
            --BOUNDARY0123456789\r
            Content-Disposition: form-data; name="g"; filename="r.txt"\r
            Content-Type: application/octet-stream\r
            \r
            hi\r
            --BOUNDARY0123456789--\r

            """
        #expect(body == expected.replacingOccurrences("\u{89}", with: "\u{FFFD}"))
    }

    @Test func fileBytesAreExact() throws {
        let object: JSONObject = JSONObject(["f": "data:;base64,AP8QgA=="])
        let encoder = MultipartEncoder(boundary: "B", options: QueryOptions())
        let body = encoder.encode(object, fileKeys: ["f"])
        let header = Array("--B\r\nContent-Disposition: form-data; name=\"f\"; filename=\"f\"\r\nContent-Type: text/plain;charset=US-ASCII\r\n\r\n".utf8)
        #expect(body == header + [0x00, 0xFF, 0x10, 0x80] + Array("\r\n--B--\r\n".utf8))
    }

    @Test func emptyObjectIsJustTheCloseDelimiter() {
        #expect(MultipartEncoder(boundary: "B", options: QueryOptions()).encode(JSONObject()) == Array("--B--\r\n".utf8))
    }

    @Test func randomBoundaries() {
        let a = MultipartEncoder.randomBoundary(), b = MultipartEncoder.randomBoundary()
        #expect(a != b)
        #expect(a.hasPrefix("gatewayd-") && a.count == 33)
        #expect(a.dropFirst(9).allSatisfy { $0.isHexDigit })
    }
}

extension String {
    func replacingOccurrences(_ target: String, with replacement: String) -> String {
        split(separator: target, omittingEmptySubsequences: false).joined(separator: replacement)
    }
}
