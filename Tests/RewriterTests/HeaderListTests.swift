import PropertyBased
import Testing
@testable import Rewriter

/// `HeaderList` against a plain model (an array of pairs, names compared
/// ASCII case-insensitively): the lookups and edits that walk the fields
/// in place must do what the obvious code does, in the same order.
@Suite struct HeaderListTests {
    typealias Model = [(name: String, value: String)]

    static let names = ["Host", "host", "HOST", "Connection", "connection", "X-Request-Id", "x-request-id", "Content-Length",
                        "A-Name-Longer-Than-Fifteen-Bytes", "é-not-ascii", "Te", "t",
                        "Upgrade", "Expect", "Transfer-Encoding", "X-Forwarded-For", "keep-alive", "User-Agent", ""]
    static let values = ["", "v", "close", "keep-alive, Upgrade", "a value longer than fifteen bytes", "ünïcode"]

    static func same(_ a: String, _ b: String) -> Bool { a.lowercased() == b.lowercased() && a.utf8.count == b.utf8.count }

    static func pick<T>(_ items: [T], _ random: inout SplitMix64) -> T { items[Int(random.next() % UInt64(items.count))] }

    @Test func editsAndLookupsMatchTheModel() async {
        await propertyCheck(count: 500, input: Gen.uint64()) { seed in
            var random = SplitMix64(seed: seed)
            var list = HeaderList()
            var model: Model = []
            for _ in 0..<(random.next() % 24) {
                let name = Self.pick(Self.names, &random), value = Self.pick(Self.values, &random)
                switch random.next() % 5 {
                case 0, 1:
                    list.add(name, value)
                    model.append((name, value))
                case 2:
                    list.set(name, value)
                    if let first = model.firstIndex(where: { Self.same($0.name, name) }) {
                        model[first] = (name, value)
                        model = model.enumerated().filter { $0.offset <= first || !Self.same($0.element.name, name) }.map(\.element)
                    } else {
                        model.append((name, value))
                    }
                case 3:
                    list.remove(name)
                    model.removeAll { Self.same($0.name, name) }
                default:
                    // A copy edited must leave the original as it was.
                    let before = list
                    var copy = list
                    copy.removeAll { Self.same($0.name, name) || $0.value == value }
                    #expect(before == list)
                    list = copy
                    model.removeAll { Self.same($0.name, name) || $0.value == value }
                }
                #expect(list.map(\.name) == model.map(\.name))
                #expect(list.map(\.value) == model.map(\.value))
                // The filter over names present is not part of the value.
                #expect(list == HeaderList(list.fields))
                #expect(list.hashValue == HeaderList(list.fields).hashValue)
            }
            for name in Self.names {
                let matches = model.indices.filter { Self.same(model[$0].name, name) }
                #expect(list.contains(name) == !matches.isEmpty)
                #expect(list[name] == matches.first.map { model[$0].value })
                #expect(list.values(name) == matches.map { model[$0].value })
                // A name given as bytes (a filter's, read in its memory) is found as its string is.
                #expect(Array(name.utf8).withUnsafeBytes { list.firstIndex(named: $0) } == matches.first)
                for start in 0...model.count {
                    #expect(list.firstIndex(named: name, from: start) == matches.first { $0 >= start })
                }
            }
        }
    }

    /// The bit-table checks against RFC 9110's grammar, byte by byte, in names and values of each length up to 40.
    @Test func namesAndValuesAreCheckedAsTheGrammarSays() {
        let token = Set("!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ".utf8)
        for byte in UInt8.min...UInt8.max {
            for length in [1, 7, 8, 15, 16, 40] {
                for position in [0, length - 1] {
                    var bytes = Array(repeating: UInt8(ascii: "a"), count: length)
                    bytes[position] = byte
                    let text = String(decoding: bytes, as: UTF8.self)
                    let decoded = Array(text.utf8) == bytes
                    #expect(HeaderList.isValidName(text) == (decoded && token.contains(byte)), "name byte \(byte)")
                    #expect(HeaderList.isValidValue(text) == !(decoded && [0x0D, 0x0A, 0].contains(byte)), "value byte \(byte)")
                }
            }
        }
        #expect(!HeaderList.isValidName(""))
        #expect(HeaderList.isValidValue(""))
    }
}
