import Foundation
import NIOCore
import Rewriter
import Testing
@testable import Gateway

/// An access line's bytes in each format, written into memory measured for
/// it: hostile values (quotes, control characters, any UTF-8, long) come
/// back whole from the JSON and logfmt a reader parses. Runs under
/// AddressSanitizer (`scripts/sanitize address`).
@Suite(.ownThreads) struct AccessLineTests {
    /// A line of `fields` text values plus a few numbers, as a string.
    static func write(_ format: AccessLine.Format, texts: [String], numbers: Bool = true) -> String {
        var clock = AccessLine.Clock()
        var buffer = ByteBuffer()
        let names: [StaticString] = ["a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l"]
        buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: AccessLine.room(textBytes: texts.reduce(0) { $0 + $1.utf8.count })) {
            var line = AccessLine(format, into: $0, clock: &clock)
            for (name, text) in zip(names, texts) { line.field(name, text) }
            if numbers {
                line.field("status", Int.min)
                line.field("bytes", Int.max)
                line.field("duration_ms", millis: Int64.max)
                line.field("upstream_ttfb_ms", millis: Int64?.none)
                line.field("upstream_status", Int?.none)
                line.field("trace_id", String?.none)
            }
            return line.finish()
        }
        return String(decoding: buffer.readableBytesView, as: UTF8.self)
    }

    func line(_ format: AccessLine.Format) -> String {
        var clock = AccessLine.Clock()
        var buffer = ByteBuffer()
        buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: AccessLine.room(textBytes: 32)) {
            var line = AccessLine(format, into: $0, clock: &clock)
            line.field("target", "/a b?x=\"1\"\n")
            line.field("status", 200)
            line.field("upstream_status", Int?.none)
            line.field("duration_ms", millis: 1_234_567)
            line.field("ua", "curl/8")
            line.field("numbers", 0)
            line.field("n", -1_234_567_890)
            return line.finish()
        }
        return String(decoding: buffer.readableBytesView, as: UTF8.self)
    }

    @Test func eachFormatWritesItsOwnWay() throws {
        let text = line(.text)
        #expect(text.hasSuffix(#" info gatewayd.access: target="/a b?x=\"1\"\n" status=200 upstream_status=- duration_ms=1.234 ua=curl/8 numbers=0 n=-1234567890"# + "\n"))
        #expect(text.count(where: { $0 == "\n" }) == 1)
        let logfmt = line(.logfmt)
        #expect(logfmt.hasPrefix("ts=20") && logfmt.contains("Z level=info logger=gatewayd.access msg=access target="))
        let json = line(.json)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any])
        #expect(object["target"] as? String == "/a b?x=\"1\"\n")
        #expect(object["status"] as? Int == 200)
        #expect(object["upstream_status"] is NSNull)
        #expect(object["duration_ms"] as? Double == 1.234)
        #expect(object["n"] as? Int == -1_234_567_890 && object["numbers"] as? Int == 0)
        // The wall clock, read once a second and carried by the monotonic one between.
        let parser = ISO8601DateFormatter()
        parser.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        let ts = try #require((object["ts"] as? String).flatMap(parser.date(from:)))
        #expect(abs(ts.timeIntervalSinceNow) < 2)
    }

    /// Values made of the bytes that need escaping most, each escaped at
    /// worst (`\u00XX`, six bytes for one): the measured room holds them.
    @Test func hostileValuesComeBackWhole() throws {
        var random = SystemRandomNumberGenerator()
        let alphabet: [Character] = ["\"", "\\", "\n", "\r", "\t", "\u{01}", "\u{1F}", "\u{7F}", " ", "=", "a", "é", "😀", "\u{0}"]
        for round in 0..<300 {
            let texts = (0..<12).map { index in
                // Empty values, single characters and long ones; one round all control bytes.
                let length = round == 0 ? 4096 : [0, 1, Int.random(in: 2...40, using: &random), Int.random(in: 200...3000, using: &random)][index % 4]
                return String((0..<length).map { _ in round == 0 ? "\u{01}" : alphabet.randomElement(using: &random)! })
            }
            let json = Self.write(.json, texts: texts)
            #expect(json.utf8.last == UInt8(ascii: "\n") && json.utf8.filter { $0 == UInt8(ascii: "\n") }.count == 1)
            let object = try #require(try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any])
            for (name, text) in zip(["a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l"], texts) {
                #expect(object[name] as? String == text, "json \(name)")
            }
            #expect(object["status"] as? Int == Int.min && object["bytes"] as? Int == Int.max)
            for format in [AccessLine.Format.logfmt, .text] {
                let line = Self.write(format, texts: texts)
                #expect(line.utf8.filter { $0 == UInt8(ascii: "\n") }.count == 1)
                let values = try #require(Self.logfmt(line))
                for (name, text) in zip(["a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l"], texts) {
                    #expect(values[name] == text, "\(format) \(name)")
                }
            }
        }
    }

    /// The eight-bytes-at-a-time check says what a byte loop says, for
    /// values of every length up to 40 made of the bytes around each it
    /// looks for (checked to fail with `=` left out of the word test).
    @Test func quietCheckAgreesWithTheByteLoop() {
        var random = SplitMix64(seed: 0x71_7569_6574)
        let bytes: [UInt8] = [0, 9, 10, 0x1F, 0x20, 0x21, 0x22, 0x23, 0x3C, 0x3D, 0x3E, 0x5B, 0x5C, 0x5D, 0x7E, 0x7F, 0x80, 0xA2, 0xBD, 0xDC, 0xFF]
        for _ in 0..<20000 {
            let value = (0..<Int(random.next() % 41)).map { _ in
                random.next() % 4 == 0 ? bytes[Int(random.next() % UInt64(bytes.count))] : 97
            }
            let expected = !value.contains { $0 <= 0x20 || $0 == 0x22 || $0 == 0x3D || $0 == 0x5C || $0 == 0x7F }
            value.withUnsafeBufferPointer { #expect(AccessLine.isQuiet($0) == expected, "\(value)") }
        }
    }

    /// A logfmt reader: `key=bare` or `key="quoted"` with JSON's escapes.
    static func logfmt(_ line: String) -> [String: String]? {
        var values: [String: String] = [:]
        var rest = Substring(line.dropLast())
        if let colon = rest.range(of: "access:") { rest = rest[colon.upperBound...] }
        while let equals = rest.firstIndex(of: "=") {
            let key = String(rest[..<equals].drop { $0 == " " }.split(separator: " ").last ?? "")
            rest = rest[rest.index(after: equals)...]
            if rest.first == "\"" {
                var end = rest.index(after: rest.startIndex)
                while end < rest.endIndex, rest[end] != "\"" { end = rest.index(end, offsetBy: rest[end] == "\\" ? 2 : 1) }
                guard end < rest.endIndex, let data = String(rest[...end]).data(using: .utf8),
                    let value = try? JSONSerialization.jsonObject(with: data, options: .fragmentsAllowed) as? String
                else { return nil }
                values[key] = value
                rest = rest[rest.index(after: end)...]
            } else {
                let end = rest.firstIndex(of: " ") ?? rest.endIndex
                values[key] = String(rest[..<end])
                rest = rest[end...]
            }
        }
        return values
    }
}
