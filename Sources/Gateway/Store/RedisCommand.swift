import CHiredis
import NIOCore

/// A command as RESP bytes, encoded by hiredis (`redisFormatCommandArgv`).
enum RedisCommand {
    static func encode(_ arguments: [String], into buffer: inout ByteBuffer) {
        let bytes = arguments.flatMap(\.utf8)
        var starts: [Int] = []
        var offset = 0
        for argument in arguments {
            starts.append(offset)
            offset += argument.utf8.count
        }
        let lengths = arguments.map { $0.utf8.count }
        bytes.withUnsafeBufferPointer { all in
            // An empty argument still needs a valid pointer.
            let base = UnsafeRawPointer(all.baseAddress ?? UnsafePointer(bitPattern: 1)!).assumingMemoryBound(to: CChar.self)
            var pointers = starts.map { Optional(base + $0) }
            var target: UnsafeMutablePointer<CChar>?
            let count = redisFormatCommandArgv(&target, Int32(arguments.count), &pointers, lengths)
            guard count > 0, let target else { return }
            buffer.writeBytes(UnsafeRawBufferPointer(start: target, count: Int(count)))
            redisFreeCommand(target)
        }
    }
}
