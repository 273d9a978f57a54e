import Foundation
import Logging
import Rewriter

/// swift-log lines for machines: one JSON object, or one logfmt line, per
/// entry on standard error — `ts`, `level`, `logger`, `msg`, then metadata.
package struct StructuredLogHandler: LogHandler {
    package enum Format: Sendable { case json, logfmt }

    package var metadata: Logger.Metadata = [:]
    package var logLevel: Logger.Level = .info
    private let label: String
    private let format: Format

    package init(label: String, format: Format) {
        self.label = label
        self.format = format
    }

    package subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    package func log(event: LogEvent) {
        var fields: [(String, JSONValue)] = [
            ("ts", .string(Self.timestamp())), ("level", .string(event.level.rawValue)), ("logger", .string(label)),
            ("msg", .string("\(event.message)")),
        ]
        let merged = metadata.merging(event.metadata ?? [:]) { _, new in new }
        for key in merged.keys.sorted() { fields.append((key, Self.value(merged[key]!))) }
        var line = format == .json ? Self.json(fields) : Self.logfmt(fields)
        line.append(0x0A)
        // One write(2) per line: lines from several threads never interleave.
        line.withUnsafeBufferPointer { bytes in _ = write(STDERR_FILENO, bytes.baseAddress, bytes.count) }
    }

    /// An integer or a floating-point number given as `.stringConvertible`
    /// is a JSON number; everything else its text.
    static func value(_ metadata: Logger.MetadataValue) -> JSONValue {
        if case .stringConvertible(let value) = metadata, value is any BinaryInteger || (value as? Double)?.isFinite == true {
            return .number(value.description)
        }
        return .string("\(metadata)")
    }

    static func json(_ fields: [(String, JSONValue)]) -> [UInt8] {
        var object = JSONObject()
        for (key, value) in fields { object.append(key, value) }
        var out: [UInt8] = []
        JSONWriter.write(object, into: &out)
        return out
    }

    /// `key=value`, values quoted (with `\"`, `\\` and `\n` escaped) when
    /// they hold a space, `=`, a quote or a control character.
    static func logfmt(_ fields: [(String, JSONValue)]) -> [UInt8] {
        var out = ""
        for (key, field) in fields {
            let value = switch field {
            case .string(let text), .number(let text): text
            default: ""
            }
            if !out.isEmpty { out += " " }
            out += key + "="
            let plain = !value.isEmpty && value.unicodeScalars.allSatisfy { $0.value > 0x20 && $0 != "=" && $0 != "\"" && $0 != "\\" && $0.value != 0x7F }
            if plain { out += value; continue }
            out += "\""
            for scalar in value.unicodeScalars {
                switch scalar {
                case "\"": out += "\\\""
                case "\\": out += "\\\\"
                case "\n": out += "\\n"
                case "\r": out += "\\r"
                case "\t": out += "\\t"
                default: out.unicodeScalars.append(scalar)
                }
            }
            out += "\""
        }
        return Array(out.utf8)
    }

    private static func timestamp() -> String {
        Date().formatted(.iso8601.year().month().day().time(includingFractionalSeconds: true).timeZone(separator: .omitted))
    }
}
