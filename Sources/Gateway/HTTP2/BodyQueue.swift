import NIOCore

/// A message body on its way into DATA frames: buffers queued by the call,
/// copied out as libnghttp2 asks (as much as the windows allow, per frame).
struct BodyQueue {
    private var buffers = CircularBuffer<ByteBuffer>()
    private(set) var count = 0
    /// The body is complete: once the queue is empty, DATA carries END_STREAM.
    var ended = false

    var isEmpty: Bool { buffers.isEmpty }

    mutating func append(_ buffer: ByteBuffer) {
        guard buffer.readableBytes > 0 else { return }
        count += buffer.readableBytes
        buffers.append(buffer)
    }

    mutating func removeAll() {
        buffers.removeAll()
        count = 0
    }

    /// Copies up to `destination.count` bytes into `destination`; returns how many.
    mutating func read(into destination: UnsafeMutableRawBufferPointer) -> Int {
        var copied = 0
        while copied < destination.count, var first = buffers.first {
            let n = min(first.readableBytes, destination.count - copied)
            first.withUnsafeReadableBytes { source in
                UnsafeMutableRawBufferPointer(rebasing: destination[copied..<(copied + n)])
                    .copyMemory(from: UnsafeRawBufferPointer(rebasing: source[..<n]))
            }
            first.moveReaderIndex(forwardBy: n)
            copied += n
            if first.readableBytes == 0 { buffers.removeFirst() } else { buffers[buffers.startIndex] = first }
        }
        count -= copied
        return copied
    }
}
