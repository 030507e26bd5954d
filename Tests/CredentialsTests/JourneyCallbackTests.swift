import JSON
import Testing

@testable import Credentials

struct JourneyCallbackTests {
    /// (the server's callback, fields of the offered JSON that must hold these values)
    static let offered: [(callback: String, expected: [String: String])] = [
        (
            #"{"type":"NameCallback","output":[{"name":"prompt","value":"User Name"}],"input":[{"name":"IDToken1","value":""}]}"#,
            ["prompt": #""User Name""#, "inputs": #"[{"name":"IDToken1","value":""}]"#]
        ),
        (
            #"{"type":"PasswordCallback","output":[{"name":"prompt","value":"Password"}],"input":[{"name":"IDToken2","value":""}]}"#,
            ["prompt": #""Password""#, "secret": "true"]
        ),
        (
            #"{"type":"TextInputCallback","output":[{"name":"prompt","value":"Nick"},{"name":"defaultText","value":"n"}],"input":[{"name":"IDToken1","value":""}]}"#,
            ["defaultText": #""n""#]
        ),
        (
            #"{"type":"ChoiceCallback","output":[{"name":"prompt","value":"Factor"},{"name":"choices","value":["Email","SMS"]},{"name":"defaultChoice","value":0}],"input":[{"name":"IDToken1","value":0}]}"#,
            ["choices": #"["Email","SMS"]"#, "defaultChoice": "0", "inputs": #"[{"name":"IDToken1","value":0}]"#]
        ),
        (
            #"{"type":"ConfirmationCallback","output":[{"name":"prompt","value":""},{"name":"messageType","value":0},{"name":"options","value":["Yes","No"]},{"name":"optionType","value":-1},{"name":"defaultOption","value":1}],"input":[{"name":"IDToken3","value":100}]}"#,
            ["options": #"["Yes","No"]"#, "defaultOption": "1", "messageType": "0"]
        ),
        (
            #"{"type":"TextOutputCallback","output":[{"name":"message","value":"Hello"},{"name":"messageType","value":"0"}]}"#,
            ["message": #""Hello""#, "messageType": #""0""#, "prompt": "null", "inputs": "[]"]
        ),
        (
            #"{"type":"PollingWaitCallback","output":[{"name":"waitTime","value":"8000"},{"name":"message","value":"Waiting"}]}"#,
            ["waitTimeMs": "8000", "message": #""Waiting""#]
        ),
        (
            #"{"type":"SuspendedTextOutputCallback","output":[{"name":"message","value":"Check your email"},{"name":"messageType","value":"0"}]}"#,
            ["message": #""Check your email""#]
        ),
        (
            #"{"type":"HiddenValueCallback","output":[{"name":"value","value":"v"},{"name":"id","value":"device"}],"input":[{"name":"IDToken4","value":"device"}]}"#,
            ["id": #""device""#, "value": #""v""#]
        ),
        (#"{"type":"MetadataCallback","output":[{"name":"data","value":{"k":1}}]}"#, ["data": #"{"k":1}"#]),
        (
            #"{"type":"BooleanAttributeInputCallback","output":[{"name":"name","value":"preferences/marketing"},{"name":"prompt","value":"Send me offers"},{"name":"required","value":false},{"name":"policies","value":{}},{"name":"failedPolicies","value":[]},{"name":"validateOnly","value":false},{"name":"value","value":false}],"input":[{"name":"IDToken5","value":false},{"name":"IDToken5validateOnly","value":false}]}"#,
            ["name": #""preferences/marketing""#, "required": "false"]
        ),
        (
            #"{"type":"NumberAttributeInputCallback","output":[{"name":"name","value":"age"},{"name":"prompt","value":"Age"},{"name":"value","value":null}],"input":[{"name":"IDToken6","value":null}]}"#,
            ["name": #""age""#]
        ),
        (
            #"{"type":"StringAttributeInputCallback","output":[{"name":"name","value":"mail"},{"name":"prompt","value":"Email"},{"name":"required","value":true}],"input":[{"name":"IDToken3","value":""}]}"#,
            ["name": #""mail""#, "required": "true"]
        ),
        (
            #"{"type":"ValidatedCreatePasswordCallback","output":[{"name":"echoOn","value":false},{"name":"prompt","value":"Password"},{"name":"failedPolicies","value":["{\"policyRequirement\":\"LENGTH_BASED\",\"params\":{\"min-password-length\":8}}"]}],"input":[{"name":"IDToken2","value":""},{"name":"IDToken2validateOnly","value":false}]}"#,
            [
                "secret": "true",
                "failedPolicies": #"[{"policyRequirement":"LENGTH_BASED","params":{"min-password-length":8}}]"#,
                "inputs":
                    #"[{"name":"IDToken2","value":"","failedPolicies":[{"policyRequirement":"LENGTH_BASED","params":{"min-password-length":8}}]},{"name":"IDToken2validateOnly","value":false}]"#,
            ]
        ),
        (
            #"{"type":"ValidatedCreateUsernameCallback","output":[{"name":"prompt","value":"Username"},{"name":"failedPolicies","value":[]}],"input":[{"name":"IDToken1","value":""},{"name":"IDToken1validateOnly","value":false}]}"#,
            ["failedPolicies": "[]"]
        ),
        (
            #"{"type":"TermsAndConditionsCallback","output":[{"name":"version","value":"1.0"},{"name":"terms","value":"Be nice"},{"name":"createDate","value":"2026-01-01"}],"input":[{"name":"IDToken1","value":false}]}"#,
            ["terms": #""Be nice""#, "version": #""1.0""#]
        ),
        (
            #"{"type":"KbaCreateCallback","output":[{"name":"prompt","value":"Security question"},{"name":"predefinedQuestions","value":["Pet?"]},{"name":"allowUserDefinedQuestions","value":true}],"input":[{"name":"IDToken3question","value":""},{"name":"IDToken3answer","value":""}]}"#,
            ["predefinedQuestions": #"["Pet?"]"#, "allowUserDefinedQuestions": "true"]
        ),
        (
            #"{"type":"ConsentMappingCallback","output":[{"name":"name","value":"crm"},{"name":"displayName","value":"CRM"},{"name":"message","value":"Share?"},{"name":"isRequired","value":true},{"name":"fields","value":[]},{"name":"accessLevel","value":"read"},{"name":"icon","value":""}],"input":[{"name":"IDToken4","value":false}]}"#,
            ["displayName": #""CRM""#, "isRequired": "true", "accessLevel": #""read""#]
        ),
        (
            #"{"type":"FancyNewCallback","output":[{"name":"color","value":"blue"}],"input":[{"name":"IDToken9","value":""}]}"#,
            ["color": #""blue""#, "inputs": #"[{"name":"IDToken9","value":""}]"#]
        ),
    ]

    @Test(
        "each callback type is offered with its type, prompt, inputs, specific fields and the raw callback",
        arguments: offered)
    func offeredCallbacks(callback: String, expected: [String: String]) throws {
        let raw = try #require(json(callback).objectValue)
        let offered = JourneyCallback(raw: raw).offered
        #expect(offered["type"] == raw["type"])
        #expect(offered["raw"] == .object(raw))
        for (key, value) in expected {
            #expect(offered[key] == json(value), "field \(key)")
        }
    }

    @Test("only types that ask something of the user are answerable; secrets are marked")
    func kinds() {
        let asks = [
            "NameCallback": true, "PasswordCallback": true, "TextOutputCallback": false, "PollingWaitCallback": false,
            "HiddenValueCallback": false, "MetadataCallback": false, "SuspendedTextOutputCallback": false,
            "ChoiceCallback": true,
        ]
        for (type, expected) in asks {
            let callback = JourneyCallback(
                raw: json(#"{"type":"\#(type)","input":[{"name":"IDToken1","value":""}]}"#).objectValue!)
            #expect(callback.asksUser == expected, "\(type)")
        }
        #expect(JourneyCallback(raw: json(#"{"type":"PasswordCallback"}"#).objectValue!).isSecret)
        #expect(!JourneyCallback(raw: json(#"{"type":"NameCallback"}"#).objectValue!).isSecret)
    }

    /// (the server's input default, the app's answer, the value sent back)
    static let coercions: [(current: String, answer: String, sent: String)] = [
        (#""""#, #""demo""#, #""demo""#),
        ("0", "1", "1"),
        ("0", #""2""#, "2"),
        ("false", "true", "true"),
        ("false", #""true""#, "true"),
        ("false", #""yes""#, #""yes""#),
        (#""""#, "7", "7"),
    ]

    @Test("answers take the type of the server's default where the text is unambiguous", arguments: coercions)
    func coercion(current: String, answer: String, sent: String) {
        #expect(JourneyCallback.coerce(json(answer), like: json(current)) == json(sent))
    }
}
