import Foundation
import NIOCore
import Synchronization

/// Where access lines go: standard error (journald's, by default), a file
/// opened for appending and reopened on request (SIGUSR1 after logrotate
/// moved it, as nginx does), or an embedder's function. Whole buffers of
/// whole lines are written under one lock, so lines from several event
/// loops never interleave.
final class AccessLogSink: Sendable {
    let path: String?
    private let custom: (@Sendable ([UInt8]) -> Void)?
    private let descriptor = Mutex<Int32>(STDERR_FILENO)

    init(path: String?, custom: (@Sendable ([UInt8]) -> Void)? = nil) {
        self.path = path
        self.custom = custom
    }

    /// Opens the file, or opens it anew; standard error needs nothing. The
    /// old descriptor closes once the new one is in place: no line is lost.
    func open() throws(StartupError) {
        guard let path, custom == nil else { return }
        let new = Glibc.open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0o640)
        guard new >= 0 else { throw StartupError(message: "access log \(path): \(String(cString: strerror(errno)))") }
        let old = descriptor.withLock { descriptor in
            defer { descriptor = new }
            return descriptor
        }
        if old != STDERR_FILENO { close(old) }
    }

    /// A full disk or a closed stderr loses lines, never the process.
    func write(_ bytes: ByteBuffer) {
        descriptor.withLock { descriptor in
            if let custom { return custom(Array(bytes.readableBytesView)) }
            bytes.withUnsafeReadableBytes { try? FileHandle(fileDescriptor: descriptor, closeOnDealloc: false).write(contentsOf: $0) }
        }
    }
}
