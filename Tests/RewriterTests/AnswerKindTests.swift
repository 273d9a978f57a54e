@testable import Rewriter
import Testing

/// `decode: auto` picks its decoder from the answer's media type, compared as
/// ASCII without case (RFC 9110 §8.3.1) and without its parameters.
@Suite struct AnswerKindTests {
    @Test(arguments: [
        ("application/json", AnswerRule.Decode.json), ("Application/JSON; charset=utf-8", .json),
        ("application/problem+JSON", .json), (" text/xml ;charset=UTF-8", .xml), ("Text/XML; Charset=UTF-8", .xml),
        ("application/soap+xml; action=\"urn:x\"", .xml), ("APPLICATION/XML", .xml),
        ("application/x-www-form-urlencoded", .form), ("Application/X-WWW-Form-Urlencoded; charset=utf-8", .form),
    ]) func aMediaTypeNamesItsDecoderInAnyCase(_ type: String, _ kind: AnswerRule.Decode) {
        #expect(AnswerTranslator.kind(of: type) == kind)
    }

    @Test(arguments: [nil, "", "text/plain", "application/jsonx", "text/xml2", "json", "application/xml-dtd"])
    func otherMediaTypesNameNone(_ type: String?) {
        #expect(AnswerTranslator.kind(of: type) == nil)
    }
}
