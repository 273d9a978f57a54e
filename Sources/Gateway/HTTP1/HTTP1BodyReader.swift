import NIOCore
import NIOHTTP1

/// Reads one message body as its framing says (RFC 9112 sections 6-7): a
/// length, chunked transfer coding, or (answers only) until the connection
/// closes. Body parts are slices of the received bytes, never copies.
/// Chunk extensions and trailer fields are read and dropped.
struct HTTP1BodyReader {
    enum Framing: Equatable {
        case length(Int)
        case chunked
        case untilClose

        /// The length a `length` framing gives (0 for the others).
        var length: Int {
            if case .length(let length) = self { return length }
            return 0
        }
    }

    private enum State {
        case length(remaining: Int)
        case untilClose
        /// Reading a chunk's size: its value so far, digits read, whitespace seen after them.
        case size(value: Int, digits: Int, whitespace: Bool)
        case chunkExtension(value: Int, length: Int)
        case sizeLF(value: Int)
        case data(remaining: Int)
        case dataCR
        case dataLF
        /// At the start of a trailer line (or the final blank line).
        case trailerStart(total: Int)
        case trailer(total: Int)
        case trailerLF(total: Int)
        case lastLF
        case done
    }

    private var state: State

    /// A chunk size line's extensions, and all trailer fields, are bounded:
    /// they are dropped, so holding more of them serves nobody.
    static let maxChunkExtension = 4096
    static let maxTrailers = 16384

    init(_ framing: Framing) {
        state = switch framing {
        case .length(let length): .length(remaining: length)
        case .chunked: .size(value: 0, digits: 0, whitespace: false)
        case .untilClose: .untilClose
        }
    }

    var isDone: Bool { if case .done = state { true } else { false } }

    /// The next body part or the body's end (as a request's or a response's
    /// part); nil when more bytes are needed.
    mutating func next<Head>(_ buffer: inout ByteBuffer) throws(HTTP1ParseError) -> HTTPPart<Head, ByteBuffer>? {
        while true {
            switch state {
            case .length(let remaining):
                if remaining == 0 {
                    state = .done
                    return .end(nil)
                }
                guard buffer.readableBytes > 0 else { return nil }
                let count = min(remaining, buffer.readableBytes)
                state = .length(remaining: remaining - count)
                return .body(buffer.readSlice(length: count)!)
            case .untilClose:
                guard buffer.readableBytes > 0 else { return nil }
                return .body(buffer.readSlice(length: buffer.readableBytes)!)
            case .data(let remaining):
                guard buffer.readableBytes > 0 else { return nil }
                let count = min(remaining, buffer.readableBytes)
                state = count == remaining ? .dataCR : .data(remaining: remaining - count)
                return .body(buffer.readSlice(length: count)!)
            case .done:
                return .end(nil)
            default:
                guard let byte = buffer.readInteger(as: UInt8.self) else { return nil }
                try advance(byte)
                if case .done = state { return .end(nil) }
            }
        }
    }

    /// The connection closed: true when that ends a body read until close,
    /// false when the body had ended already; anything else was cut short.
    mutating func inputClosed() throws(HTTP1ParseError) -> Bool {
        switch state {
        case .untilClose:
            state = .done
            return true
        case .done:
            return false
        default:
            throw .malformed("the connection closed before the body ended")
        }
    }

    /// The chunked coding's framing, one byte at a time (it is a few bytes per chunk).
    private mutating func advance(_ byte: UInt8) throws(HTTP1ParseError) {
        switch state {
        case .size(let value, let digits, let whitespace):
            if let digit = byte.hexValue, !whitespace {
                // 15 hex digits: sizes up to 2^60, no overflow.
                guard digits < 15 else { throw .malformed("a chunk size is too large") }
                state = .size(value: value << 4 | digit, digits: digits + 1, whitespace: false)
            } else if digits > 0, byte == .space || byte == .tab {
                state = .size(value: value, digits: digits, whitespace: true)
            } else if digits > 0, byte == UInt8(ascii: ";") {
                state = .chunkExtension(value: value, length: 1)
            } else if digits > 0, byte == .cr {
                state = .sizeLF(value: value)
            } else if digits > 0, byte == .lf {
                throw .malformed("a chunk size line does not end in CRLF")
            } else {
                throw .malformed("a chunk size is not a hexadecimal number")
            }
        case .chunkExtension(let value, let length):
            if byte == .cr {
                state = .sizeLF(value: value)
            } else if byte == .tab || byte >= .space && byte != 0x7F {
                guard length < Self.maxChunkExtension else { throw .malformed("a chunk extension is too long") }
                state = .chunkExtension(value: value, length: length + 1)
            } else {
                throw .malformed("a chunk extension holds a control character")
            }
        case .sizeLF(let value):
            guard byte == .lf else { throw .malformed("a chunk size line does not end in CRLF") }
            state = value == 0 ? .trailerStart(total: 0) : .data(remaining: value)
        case .dataCR:
            guard byte == .cr else { throw .malformed("chunk data is longer than its size") }
            state = .dataLF
        case .dataLF:
            guard byte == .lf else { throw .malformed("chunk data does not end in CRLF") }
            state = .size(value: 0, digits: 0, whitespace: false)
        case .trailerStart(let total):
            state = byte == .cr ? .lastLF : .trailer(total: total)
            if byte != .cr { try advance(byte) }
        case .trailer(let total):
            if byte == .cr {
                state = .trailerLF(total: total)
            } else if byte == .tab || byte >= .space && byte != 0x7F {
                guard total < Self.maxTrailers else { throw .malformed("the trailer fields are too long") }
                state = .trailer(total: total + 1)
            } else {
                throw .malformed("a trailer field holds a control character")
            }
        case .trailerLF(let total):
            guard byte == .lf else { throw .malformed("a trailer field does not end in CRLF") }
            state = .trailerStart(total: total)
        case .lastLF:
            guard byte == .lf else { throw .malformed("the chunked body does not end in CRLF") }
            state = .done
        case .length, .untilClose, .data, .done:
            preconditionFailure("not a framing state")
        }
    }
}

extension UInt8 {
    var hexValue: Int? {
        switch self {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): Int(self - UInt8(ascii: "0"))
        case UInt8(ascii: "a")...UInt8(ascii: "f"): Int(self - UInt8(ascii: "a") + 10)
        case UInt8(ascii: "A")...UInt8(ascii: "F"): Int(self - UInt8(ascii: "A") + 10)
        default: nil
        }
    }
}
