/// The Proxy-Wasm ABI's numbers (github proxy-wasm/spec, abi-versions/v0.2.1)
/// and its one wire format, the serialized map.
enum ProxyWasm {
    /// The ABI versions a module may declare by exporting a marker function, newest first.
    static let abiVersions = ["proxy_abi_version_0_2_1", "proxy_abi_version_0_2_0", "proxy_abi_version_0_1_0"]

    enum Status: Int32 {
        case ok = 0, notFound = 1, badArgument = 2, serializationFailure = 3, parseFailure = 4
        case invalidMemoryAccess = 6, empty = 7, casMismatch = 8, internalFailure = 10, unimplemented = 12
    }

    enum Action: UInt32 {
        case `continue` = 0, pause = 1
    }

    enum MapType: UInt32 {
        case requestHeaders = 0, requestTrailers = 1, responseHeaders = 2, responseTrailers = 3
        case grpcInitialMetadata = 4, grpcTrailingMetadata = 5, httpCallResponseHeaders = 6, httpCallResponseTrailers = 7
    }

    enum BufferType: UInt32 {
        case requestBody = 0, responseBody = 1, downstreamData = 2, upstreamData = 3, httpCallResponseBody = 4
        case grpcMessage = 5, vmConfiguration = 6, pluginConfiguration = 7, foreignFunctionArguments = 8
    }

    enum StreamType: UInt32 {
        case request = 0, response = 1, downstream = 2, upstream = 3
    }

    enum MetricType: UInt32 {
        case counter = 0, gauge = 1, histogram = 2
    }

    /// WASI preview1's error numbers the host answers with.
    enum Errno: Int32 {
        case success = 0, badf = 8, fault = 21, inval = 28, nosys = 52, notsup = 58
    }

    /// A map as the ABI serializes it: the count, each key's and value's
    /// length, then each key and value followed by a NUL (little-endian).
    static func serialize(_ pairs: [(name: String, value: String)]) -> [UInt8] {
        serialize(count: pairs.count) { pair in
            pairs.withUnsafeBufferPointer { pairs in
                for i in pairs.indices { pair(pairs[i].name, pairs[i].value) }
            }
        }
    }

    /// `forEachPair` hands over the map's `count` pairs in order, each time it is called.
    static func serialize(count: Int, _ forEachPair: ((String, String) -> Void) -> Void) -> [UInt8] {
        var size = 4 + count * 8
        forEachPair { name, value in size += name.utf8.count + value.utf8.count + 2 }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(size)
        append(UInt32(count), to: &bytes)
        forEachPair { name, value in
            append(UInt32(name.utf8.count), to: &bytes)
            append(UInt32(value.utf8.count), to: &bytes)
        }
        forEachPair { name, value in
            bytes.append(contentsOf: name.utf8)
            bytes.append(0)
            bytes.append(contentsOf: value.utf8)
            bytes.append(0)
        }
        return bytes
    }

    /// The pairs of a serialized map a guest wrote (nil: it is malformed).
    /// Guest bytes are hostile: every length is checked against what is there.
    static func deserialize(_ bytes: [UInt8]) -> [(name: String, value: String)]? {
        // An empty map may be no bytes, or one zero byte.
        if bytes.isEmpty || bytes == [0] { return [] }
        guard let count = readUInt32(bytes, at: 0).map(Int.init) else { return nil }
        // Each pair takes at least 8 bytes of lengths and 2 NULs.
        guard count <= (bytes.count - 4) / 10 else { return nil }
        var lengths: [(Int, Int)] = []
        lengths.reserveCapacity(count)
        for index in 0..<count {
            guard let name = readUInt32(bytes, at: 4 + index * 8), let value = readUInt32(bytes, at: 8 + index * 8) else { return nil }
            lengths.append((Int(name), Int(value)))
        }
        var offset = 4 + count * 8
        var pairs: [(name: String, value: String)] = []
        pairs.reserveCapacity(count)
        for (nameLength, valueLength) in lengths {
            guard let name = string(bytes, at: offset, length: nameLength) else { return nil }
            offset += nameLength + 1
            guard let value = string(bytes, at: offset, length: valueLength) else { return nil }
            offset += valueLength + 1
            pairs.append((name, value))
        }
        return pairs
    }

    static func append(_ value: UInt32, to bytes: inout [UInt8]) {
        withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0) }
    }

    static func append(_ value: UInt64, to bytes: inout [UInt8]) {
        withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0) }
    }

    static func readUInt32(_ bytes: [UInt8], at offset: Int) -> UInt32? {
        guard offset >= 0, offset <= bytes.count - 4 else { return nil }
        return UInt32(bytes[offset]) | UInt32(bytes[offset + 1]) << 8 | UInt32(bytes[offset + 2]) << 16 | UInt32(bytes[offset + 3]) << 24
    }

    /// `length` bytes at `offset`, followed by the NUL the format puts after each string.
    private static func string(_ bytes: [UInt8], at offset: Int, length: Int) -> String? {
        guard offset <= bytes.count, length < bytes.count - offset, bytes[offset + length] == 0 else { return nil }
        return String(decoding: bytes[offset..<offset + length], as: UTF8.self)
    }
}
