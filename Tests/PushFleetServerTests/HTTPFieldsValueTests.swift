import HTTPTypes
import PushFleetServerSupport
import Testing

@Suite("A field's value by name")
struct HTTPFieldsValueTests {
    /// The same answer as the look-up by name, for hostile repeats and spellings too.
    @Test(arguments: [
        [("Authorization", "Basic YTpi")],
        [],
        [("Authorization", "Basic YTpi"), ("authorization", "Bearer x")],
        [("traceparent", ""), ("Traceparent", "00-x"), ("TRACEPARENT", " ")],
        [("Cookie", "a=1"), ("cookie", "b=2")],
        [("X-Other", "1"), ("authorizationx", "2")],
    ])
    func isTheLookUpByName(_ pairs: [(String, String)]) {
        var fields = HTTPFields()
        for (name, value) in pairs { fields.append(HTTPField(name: HTTPField.Name(name)!, value: value)) }
        for name in [HTTPField.Name.authorization, .cookie, HTTPField.Name("traceparent")!] {
            #expect(fields.value(of: name) == fields[name], "\(name) in \(pairs)")
        }
    }
}
