@testable import Rewriter

extension JSONReader {
    /// A document whose top level must be an object: the tests' fixtures.
    static func parseObject(_ bytes: [UInt8]) throws(JSONError) -> JSONObject {
        guard case .object(let object) = try parse(bytes) else { throw JSONError("the top level must be a JSON object", at: 0) }
        return object
    }
}
