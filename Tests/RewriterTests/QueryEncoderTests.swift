import Testing
@testable import Rewriter

@Suite struct QueryEncoderTests {
    static let sample: JSONObject = try! JSONReader.parseObject(Array(
        "{\"q\":\"a b&c=d+e%f#g\",\"n\":1.0,\"e\":1e3,\"t\":true,\"f\":false,\"z\":null,\"a\":[1,2],\"u\":{\"n\":\"x\",\"l\":[\"y\"]}}".utf8))

    @Test(arguments: [
        (QueryOptions(), "q=a%20b%26c%3Dd%2Be%25f%23g&n=1.0&e=1e3&t=1&f=0&a%5B%5D=1&a%5B%5D=2&u%5Bn%5D=x&u%5Bl%5D%5B%5D=y"),
        (QueryOptions(arrays: .indices), "q=a%20b%26c%3Dd%2Be%25f%23g&n=1.0&e=1e3&t=1&f=0&a%5B0%5D=1&a%5B1%5D=2&u%5Bn%5D=x&u%5Bl%5D%5B0%5D=y"),
        (QueryOptions(arrays: .repeat), "q=a%20b%26c%3Dd%2Be%25f%23g&n=1.0&e=1e3&t=1&f=0&a=1&a=2&u%5Bn%5D=x&u%5Bl%5D=y"),
        (QueryOptions(arrays: .comma), "q=a%20b%26c%3Dd%2Be%25f%23g&n=1.0&e=1e3&t=1&f=0&a=1%2C2&u%5Bn%5D=x&u%5Bl%5D=y"),
        (QueryOptions(booleans: .literals), "q=a%20b%26c%3Dd%2Be%25f%23g&n=1.0&e=1e3&t=true&f=false&a%5B%5D=1&a%5B%5D=2&u%5Bn%5D=x&u%5Bl%5D%5B%5D=y"),
        (QueryOptions(nested: .dots), "q=a%20b%26c%3Dd%2Be%25f%23g&n=1.0&e=1e3&t=1&f=0&a%5B%5D=1&a%5B%5D=2&u.n=x&u.l%5B%5D=y"),
        (QueryOptions(nulls: .empty), "q=a%20b%26c%3Dd%2Be%25f%23g&n=1.0&e=1e3&t=1&f=0&z=&a%5B%5D=1&a%5B%5D=2&u%5Bn%5D=x&u%5Bl%5D%5B%5D=y"),
        (QueryOptions(nulls: .bare), "q=a%20b%26c%3Dd%2Be%25f%23g&n=1.0&e=1e3&t=1&f=0&z&a%5B%5D=1&a%5B%5D=2&u%5Bn%5D=x&u%5Bl%5D%5B%5D=y"),
        (QueryOptions(spaces: .plus), "q=a+b%26c%3Dd%2Be%25f%23g&n=1.0&e=1e3&t=1&f=0&a%5B%5D=1&a%5B%5D=2&u%5Bn%5D=x&u%5Bl%5D%5B%5D=y"),
        (QueryOptions(order: .sorted), "a%5B%5D=1&a%5B%5D=2&e=1e3&f=0&n=1.0&q=a%20b%26c%3Dd%2Be%25f%23g&t=1&u%5Bl%5D%5B%5D=y&u%5Bn%5D=x"),
    ])
    func everyOption(options: QueryOptions, expected: String) {
        let encoder = QueryEncoder(options: options, spaceAsPlus: options.spaces == .plus)
        #expect(String(decoding: encoder.encode(Self.sample), as: UTF8.self) == expected)
    }

    @Test(arguments: [
        ("{\"é\":\"😀\"}", "%C3%A9=%F0%9F%98%80"),
        ("{\"k~._-\":\"AZaz09-._~\"}", "k~._-=AZaz09-._~"),
        ("{\"a\":[],\"o\":{},\"b\":\"\"}", "b="),
        ("{\"m\":[[1,2],[3]]}", "m%5B%5D%5B%5D=1&m%5B%5D%5B%5D=2&m%5B%5D%5B%5D=3"),
        ("{\"m\":[{\"x\":1},{\"x\":2}]}", "m%5B%5D%5Bx%5D=1&m%5B%5D%5Bx%5D=2"),
        ("{\"d\":{\"e\":{\"f\":[true]}}}", "d%5Be%5D%5Bf%5D%5B%5D=1"),
        ("{\"big\":123456789012345678901234567890,\"neg\":-0}", "big=123456789012345678901234567890&neg=-0"),
        ("{\"pct\":\"%41\"}", "pct=%2541"),
    ])
    func edges(input: String, expected: String) throws {
        let object = try JSONReader.parseObject(Array(input.utf8))
        #expect(String(decoding: QueryEncoder(options: QueryOptions(), spaceAsPlus: false).encode(object), as: UTF8.self) == expected)
    }

    @Test func sortedOrderIsByteOrderAtEveryLevel() throws {
        let object = try JSONReader.parseObject(Array("{\"b\":{\"z\":1,\"Z\":2,\"é\":3},\"a\":1,\"B\":2}".utf8))
        let encoder = QueryEncoder(options: QueryOptions(order: .sorted), spaceAsPlus: false)
        #expect(String(decoding: encoder.encode(object), as: UTF8.self) == "B=2&a=1&b%5BZ%5D=2&b%5Bz%5D=1&b%5B%C3%A9%5D=3")
    }

    @Test func commaArraysWithContainersFallBackToBrackets() throws {
        let object = try JSONReader.parseObject(Array("{\"a\":[1,{\"b\":2}],\"c\":[null,1]}".utf8))
        let encoder = QueryEncoder(options: QueryOptions(arrays: .comma), spaceAsPlus: false)
        #expect(String(decoding: encoder.encode(object), as: UTF8.self) == "a%5B%5D=1&a%5B%5D%5Bb%5D=2&c=1")
    }

    @Test func decoderMakesRepeatedKeysArraysAtFirstPosition() throws {
        let object = try QueryDecoder.decode("a=1&b=x+y&a=2&c&a=%E2%82%AC&&d=%zz&e=")
        #expect(object == JSONObject(["a": ["1", "2", "€"], "b": "x y", "c": "", "d": "%zz", "e": ""]))
        #expect(throws: RewriteError.self) { try QueryDecoder.decode("a=%C3%28") }
    }
}
