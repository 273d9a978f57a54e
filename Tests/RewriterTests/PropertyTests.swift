import PropertyBased
import Testing
@testable import Rewriter

/// Decoding what the encoders wrote gives the parameters back.
@Suite struct PropertyTests {
    @Test func jsonRoundTrips() async {
        await propertyCheck(count: 300, input: Gen.uint64()) { seed in
            var random = SplitMix64(seed: seed)
            let value = JSONValue.object(random.object(depth: 3))
            let bytes = JSONWriter.bytes(value)
            #expect((try? JSONReader.parse(bytes)) == value)
        }
    }

    @Test(arguments: [QueryOptions.Spaces.percent, .plus])
    func flatQueryRoundTrips(spaces: QueryOptions.Spaces) async {
        await propertyCheck(count: 300, input: Gen.uint64()) { seed in
            var random = SplitMix64(seed: seed)
            let object = random.flatParameters()
            let encoder = QueryEncoder(options: QueryOptions(arrays: .repeat, spaces: spaces), spaceAsPlus: spaces == .plus)
            #expect((try? QueryDecoder.decode(encoder.encode(object))) == object)
        }
    }

    @Test func templateQueryRoundTrips() async throws {
        let template = try URITemplate("/x{?a,b}")
        await propertyCheck(count: 200, input: Gen.uint64()) { seed in
            var random = SplitMix64(seed: seed)
            let a = random.string(), b = random.string()
            let expanded = template.expand(JSONObject(["a": .string(a), "b": .string(b)]))
            let query = expanded.dropFirst(3)
            #expect((try? QueryDecoder.decode(String(query))) == JSONObject(["a": .string(a), "b": .string(b)]))
        }
    }

    @Test func multipartRoundTrips() async {
        await propertyCheck(count: 200, input: Gen.uint64()) { seed in
            var random = SplitMix64(seed: seed)
            let object = random.flatParameters()
            let body = MultipartEncoder(boundary: "b0und4ry-b0und4ry", options: QueryOptions()).encode(object)
            #expect(parseMultipart(body, boundary: "b0und4ry-b0und4ry") == object)
        }
    }
}

/// A minimal RFC 7578 reader for the round trip, working on bytes: names
/// unescaped, repeated names become arrays.
func parseMultipart(_ body: [UInt8], boundary: String) -> JSONObject? {
    let delimiter = Array("--\(boundary)".utf8), crlf = Array("\r\n".utf8)
    guard body.starts(with: delimiter), body.suffix(delimiter.count + 4).elementsEqual(delimiter + Array("--\r\n".utf8)) else { return nil }
    var object = JSONObject()
    var rest = body[...]
    while rest.starts(with: delimiter + crlf) {
        rest = rest.dropFirst(delimiter.count + 2)
        guard let headerEnd = rest.firstRange(of: crlf + crlf), let next = rest.firstRange(of: crlf + delimiter) else { return nil }
        let header = String(decoding: rest[..<headerEnd.lowerBound], as: UTF8.self)
        guard let nameStart = header.range(of: "name=\"") else { return nil }
        let name = String(header[nameStart.upperBound...].dropLast())
            .replacingOccurrences("%22", with: "\"").replacingOccurrences("%0D", with: "\r").replacingOccurrences("%0A", with: "\n")
        let value = JSONValue.string(String(decoding: rest[headerEnd.upperBound..<next.lowerBound], as: UTF8.self))
        switch object[name] {
        case nil: object.append(name, value)
        case .array(let list)?: object[name] = .array(list + [value])
        case let first?: object[name] = .array([first, value])
        }
        rest = rest[(next.lowerBound + 2)...]
    }
    return object
}

/// Deterministic parameter trees full of characters that need escaping.
extension SplitMix64 {
    static let alphabet: [Character] = Array("aZ09-._~ &=+%#?/[]\"\\\r\n\té€😀\u{0}\u{7F}ü,;:")

    mutating func string(maxLength: Int = 8) -> String {
        String((0..<Int.random(in: 0...maxLength, using: &self)).map { _ in Self.alphabet.randomElement(using: &self)! })
    }

    mutating func key(avoiding object: JSONObject) -> String {
        while true {
            let k = string()
            if !k.isEmpty && object.index(forKey: k) == nil { return k }
        }
    }

    mutating func scalar() -> JSONValue {
        switch Int.random(in: 0..<6, using: &self) {
        case 0: .null
        case 1: .bool(Bool.random(using: &self))
        case 2: .number(["0", "-0", "1.0", "1e3", "-12.5E-3", "123456789012345678901234567890"].randomElement(using: &self)!)
        default: .string(string())
        }
    }

    mutating func object(depth: Int) -> JSONObject {
        var object = JSONObject()
        for _ in 0..<Int.random(in: 0...5, using: &self) {
            let k = key(avoiding: object)
            switch depth > 0 ? Int.random(in: 0..<5, using: &self) : 0 {
            case 0, 1, 2: object.append(k, scalar())
            case 3: object.append(k, .array((0..<Int.random(in: 0...3, using: &self)).map { _ in scalar() }))
            default: object.append(k, .object(self.object(depth: depth - 1)))
            }
        }
        return object
    }

    /// What a query string can carry: strings, and arrays of two or more strings.
    mutating func flatParameters() -> JSONObject {
        var object = JSONObject()
        for _ in 0..<Int.random(in: 0...6, using: &self) {
            let k = key(avoiding: object)
            if Bool.random(using: &self) {
                object.append(k, .string(string()))
            } else {
                object.append(k, .array((0..<Int.random(in: 2...4, using: &self)).map { _ in .string(string()) }))
            }
        }
        return object
    }
}
