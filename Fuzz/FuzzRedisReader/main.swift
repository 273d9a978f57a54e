// libFuzzer entry: hiredis's reader on hostile replies, fed in pieces the
// input chooses; what it reads, written back as RESP, reads the same. Then
// commands encoded by hiredis (arguments split from the input on 0xFF)
// read back as the arrays of the same strings.
import NIOCore
@testable import Gateway

func resp(_ value: RedisValue) -> [UInt8] {
    switch value {
    case .string(let bytes): Array("$\(bytes.count)\r\n".utf8) + bytes + Array("\r\n".utf8)
    case .status(let text): Array("+\(text)\r\n".utf8)
    case .error(let text): Array("-\(text)\r\n".utf8)
    case .integer(let number): Array(":\(number)\r\n".utf8)
    case .array(let values): Array("*\(values.count)\r\n".utf8) + values.flatMap(resp)
    case .null: Array("$-1\r\n".utf8)
    }
}

func read(_ bytes: [UInt8], pieces: Int) -> [RedisValue]? {
    let reader = RedisReader()
    var values: [RedisValue] = []
    let step = max(1, bytes.count / max(1, pieces))
    do {
        for start in stride(from: 0, to: bytes.count, by: step) {
            try bytes[start..<min(start + step, bytes.count)].withUnsafeBytes { try reader.feed($0) }
            while let value = try reader.next() { values.append(value) }
        }
    } catch {
        return nil
    }
    return values
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ start: UnsafeRawPointer, _ count: Int) -> CInt {
    let input = Array(UnsafeRawBufferPointer(start: start, count: count))
    guard let pieces = input.first else { return 0 }
    let wire = Array(input.dropFirst())
    if let values = read(wire, pieces: Int(pieces % 8) + 1) {
        // Status and error texts hold no CR or LF once read, so they write back as they were.
        let again = read(values.flatMap(resp), pieces: 3)
        precondition(again == values, "RESP written back read differently")
    }
    let arguments = wire.split(separator: 0xFF, omittingEmptySubsequences: false).prefix(16).map { String(decoding: $0, as: UTF8.self) }
    var command = ByteBuffer()
    RedisCommand.encode(arguments, into: &command)
    let decoded = read(Array(command.readableBytesView), pieces: Int(pieces % 5) + 1)
    precondition(decoded == [.array(arguments.map { .string(Array($0.utf8)) })], "a command did not read back as its arguments")
    return 0
}
