import Testing
@testable import Rewriter

/// RFC 6570 section 3.2's own examples, with its variables.
@Suite struct URITemplateTests {
    static let variables: JSONObject = {
        var o = JSONObject()
        o.append("count", ["one", "two", "three"])
        o.append("dom", ["example", "com"])
        o.append("dub", "me/too")
        o.append("hello", "Hello World!")
        o.append("half", "50%")
        o.append("var", "value")
        o.append("who", "fred")
        o.append("base", "http://example.com/home/")
        o.append("path", "/foo/bar")
        o.append("list", ["red", "green", "blue"])
        o.append("keys", .object(JSONObject(["semi": ";", "dot": ".", "comma": ","])))
        o.append("v", "6")
        o.append("x", "1024")
        o.append("y", "768")
        o.append("empty", "")
        o.append("empty_keys", .object(JSONObject()))
        o.append("undef", .null)
        return o
    }()

    @Test(arguments: [
        // 3.2.2 simple
        ("{var}", "value"), ("{hello}", "Hello%20World%21"), ("{half}", "50%25"), ("O{empty}X", "OX"), ("O{undef}X", "OX"),
        ("{x,y}", "1024,768"), ("{x,hello,y}", "1024,Hello%20World%21,768"), ("?{x,empty}", "?1024,"), ("?{x,undef}", "?1024"),
        ("?{undef,y}", "?768"), ("{var:3}", "val"), ("{var:30}", "value"), ("{list}", "red,green,blue"),
        ("{list*}", "red,green,blue"), ("{keys}", "semi,%3B,dot,.,comma,%2C"), ("{keys*}", "semi=%3B,dot=.,comma=%2C"),
        // 3.2.3 reserved
        ("{+var}", "value"), ("{+hello}", "Hello%20World!"), ("{+half}", "50%25"),
        ("{base}index", "http%3A%2F%2Fexample.com%2Fhome%2Findex"), ("{+base}index", "http://example.com/home/index"),
        ("O{+empty}X", "OX"), ("O{+undef}X", "OX"), ("{+path}/here", "/foo/bar/here"), ("here?ref={+path}", "here?ref=/foo/bar"),
        ("up{+path}{var}/here", "up/foo/barvalue/here"), ("{+x,hello,y}", "1024,Hello%20World!,768"),
        ("{+path,x}/here", "/foo/bar,1024/here"), ("{+path:6}/here", "/foo/b/here"), ("{+list}", "red,green,blue"),
        ("{+list*}", "red,green,blue"), ("{+keys}", "semi,;,dot,.,comma,,"), ("{+keys*}", "semi=;,dot=.,comma=,"),
        // 3.2.4 fragment
        ("{#var}", "#value"), ("{#hello}", "#Hello%20World!"), ("{#half}", "#50%25"), ("foo{#empty}", "foo#"),
        ("foo{#undef}", "foo"), ("{#x,hello,y}", "#1024,Hello%20World!,768"), ("{#path,x}/here", "#/foo/bar,1024/here"),
        ("{#path:6}/here", "#/foo/b/here"), ("{#list}", "#red,green,blue"), ("{#list*}", "#red,green,blue"),
        ("{#keys}", "#semi,;,dot,.,comma,,"), ("{#keys*}", "#semi=;,dot=.,comma=,"),
        // 3.2.5 label
        ("{.who}", ".fred"), ("{.who,who}", ".fred.fred"), ("{.half,who}", ".50%25.fred"), ("www{.dom*}", "www.example.com"),
        ("X{.var}", "X.value"), ("X{.empty}", "X."), ("X{.undef}", "X"), ("X{.var:3}", "X.val"), ("X{.list}", "X.red,green,blue"),
        ("X{.list*}", "X.red.green.blue"), ("X{.keys}", "X.semi,%3B,dot,.,comma,%2C"), ("X{.keys*}", "X.semi=%3B.dot=..comma=%2C"),
        ("X{.empty_keys}", "X"), ("X{.empty_keys*}", "X"),
        // 3.2.6 path segments
        ("{/who}", "/fred"), ("{/who,who}", "/fred/fred"), ("{/half,who}", "/50%25/fred"), ("{/who,dub}", "/fred/me%2Ftoo"),
        ("{/var}", "/value"), ("{/var,empty}", "/value/"), ("{/var,undef}", "/value"), ("{/var,x}/here", "/value/1024/here"),
        ("{/var:1,var}", "/v/value"), ("{/list}", "/red,green,blue"), ("{/list*}", "/red/green/blue"),
        ("{/list*,path:4}", "/red/green/blue/%2Ffoo"), ("{/keys}", "/semi,%3B,dot,.,comma,%2C"), ("{/keys*}", "/semi=%3B/dot=./comma=%2C"),
        // 3.2.7 path-style parameters
        ("{;who}", ";who=fred"), ("{;half}", ";half=50%25"), ("{;empty}", ";empty"), ("{;v,empty,who}", ";v=6;empty;who=fred"),
        ("{;v,bar,who}", ";v=6;who=fred"), ("{;x,y}", ";x=1024;y=768"), ("{;x,y,empty}", ";x=1024;y=768;empty"),
        ("{;x,y,undef}", ";x=1024;y=768"), ("{;hello:5}", ";hello=Hello"), ("{;list}", ";list=red,green,blue"),
        ("{;list*}", ";list=red;list=green;list=blue"), ("{;keys}", ";keys=semi,%3B,dot,.,comma,%2C"),
        ("{;keys*}", ";semi=%3B;dot=.;comma=%2C"),
        // 3.2.8 query
        ("{?who}", "?who=fred"), ("{?half}", "?half=50%25"), ("{?x,y}", "?x=1024&y=768"), ("{?x,y,empty}", "?x=1024&y=768&empty="),
        ("{?x,y,undef}", "?x=1024&y=768"), ("{?var:3}", "?var=val"), ("{?list}", "?list=red,green,blue"),
        ("{?list*}", "?list=red&list=green&list=blue"), ("{?keys}", "?keys=semi,%3B,dot,.,comma,%2C"),
        ("{?keys*}", "?semi=%3B&dot=.&comma=%2C"),
        // 3.2.9 continuation
        ("{&who}", "&who=fred"), ("{&half}", "&half=50%25"), ("?fixed=yes{&x}", "?fixed=yes&x=1024"),
        ("{&x,y,empty}", "&x=1024&y=768&empty="), ("{&var:3}", "&var=val"), ("{&list}", "&list=red,green,blue"),
        ("{&list*}", "&list=red&list=green&list=blue"), ("{&keys}", "&keys=semi,%3B,dot,.,comma,%2C"),
        ("{&keys*}", "&semi=%3B&dot=.&comma=%2C"),
    ])
    func rfc6570Examples(template: String, expected: String) throws {
        #expect(try URITemplate(template).expand(Self.variables) == expected)
    }

    @Test func literalsAreEncodedOnceAndTripletsKept() throws {
        #expect(try URITemplate("/caf\u{E9}/%41{/var}").expand(Self.variables) == "/caf%C3%A9/%41/value")
        #expect(try URITemplate("/a{var:2}").expand(JSONObject(["var": "ünï"])) == "/a%C3%BCn")
        // RFC 6570 erratum 6937: an apostrophe is a literal like any sub-delim.
        #expect(try URITemplate("/it's{/var}").expand(Self.variables) == "/it's/value")
    }

    @Test(arguments: ["{var", "{}", "{=var}", "{!var}", "{var:0}", "{var:10000}", "{va r}", "{var..x}", "{.var.}", "/a}b", "/a b",
                      "/50%", "/%G1", "{var*:3}", "{var,}"])
    func invalidTemplates(template: String) {
        #expect(throws: URITemplateError.self) { try URITemplate(template) }
    }

    @Test func variableNames() throws {
        #expect(try URITemplate("/u/{id}{?q,sort}{&q}").variableNames == ["id", "q", "sort"])
    }

    /// An expansion goes upstream as a target: no dot segment in any
    /// operator, no `?` or `#` a reserved expansion slips into the path,
    /// repeated slashes merged. `expected` nil: refused, naming `refused`.
    @Test(arguments: [
        ("/users/{uid}/posts/{pid}", ["uid": "..", "pid": ".."], nil, "uid"),
        ("/base/items/{id}", ["id": ".."], nil, "id"),
        ("/base/items/{id}", ["id": "."], nil, "id"),
        ("/base/items/{id}", ["id": "..."], "/base/items/...", nil),
        ("/base/items/{id}", ["id": "a.b"], "/base/items/a.b", nil),
        ("/base/items/{id}", ["id": "%2e%2e"], "/base/items/%252e%252e", nil),
        ("/x/{+id}", ["id": "../../admin"], nil, "id"),
        ("/x/{+id}", ["id": "a/%2E%2e/b"], nil, "id"),
        ("/x/{+id}", ["id": "a/b"], "/x/a/b", nil),
        ("/x/{+id}", ["id": "a?admin=1"], nil, "id"),
        ("/x/{+id}", ["id": "a#frag"], nil, "id"),
        ("/x/{+id}", ["id": "a//b/"], "/x/a/b/", nil),
        ("/x{/id}", ["id": ".."], nil, "id"),
        ("/x{/id*}", ["id": ["a", ".."]], nil, "id"),
        ("/x/{.id}", ["id": "."], nil, "id"),
        ("/x/{;id}", ["id": ".."], "/x/;id=..", nil),
        ("/x{?q}", ["q": "../.."], "/x?q=..%2F..", nil),
        ("/x?a={+q}", ["q": "b?c#d"], "/x?a=b?c#d", nil),
        ("/x{&q}", ["q": ".."], "/x&q=..", nil),
        ("/a/{x}/b", ["x": ""], "/a/b", nil),
    ] as [(String, [String: JSONValue], String?, String?)])
    func anExpansionIsASafeTarget(template: String, values: [String: JSONValue], expected: String?, refused: String?) throws {
        let parsed = try URITemplate(template)
        do {
            let target = try parsed.expandTarget(lookup: { values[$0] }, text: { QueryOptions().text(of: $0) })
            #expect(String(decoding: target, as: UTF8.self) == expected, "\(template)")
            #expect(refused == nil)
        } catch {
            #expect(error.key == refused && expected == nil, "\(template): \(error)")
            #expect(error.code == .invalidParameter)
        }
    }
}
