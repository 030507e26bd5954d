import JSON
import Testing

@testable import Credentials

struct JourneyStepTests {
    /// (HTTP status, body, the reply kind expected, and its detail)
    static let replies: [(status: Int, body: String, expected: String)] = [
        (200, stepJSON(namePasswordCallbacks), "step"),
        (200, #"{"tokenId":"tok","successUrl":"/console","realm":"/alpha"}"#, "success:tok"),
        (200, #"{"successUrl":"/console","realm":"/alpha"}"#, "success:nil"),
        (401, #"{"code":401,"reason":"Unauthorized","message":"Login failure"}"#, "refused:Login failure"),
        (400, #"{"code":400,"reason":"Bad Request","message":"Invalid authId"}"#, "refused:Invalid authId"),
        (500, #"{"code":500,"message":"boom"}"#, "failed:AM answered HTTP 500"),
        (503, "", "failed:AM answered HTTP 503"),
        (200, "<html>", "failed:AM's answer (HTTP 200) is not a JSON object"),
        (200, #"{"authId":"a","callbacks":[{"output":[]}]}"#, "failed:AM's step has malformed callbacks"),
        (200, #"{"hello":1}"#, "failed:AM's answer is neither a step nor a success"),
        (302, #"{}"#, "failed:AM answered HTTP 302"),
    ]

    @Test(
        "AM's answers are classified into step, success, refused (error node) and failed (failure node)",
        arguments: replies)
    func classify(status: Int, body: String, expected: String) {
        let reply = JourneyReply.parse(status: status, body: Array(body.utf8))
        let kind: String
        switch reply {
        case .step: kind = "step"
        case .success(let token): kind = "success:\(token ?? "nil")"
        case .refused(let message, _): kind = "refused:\(message)"
        case .failed(let cause): kind = "failed:\(cause)"
        }
        #expect(kind == expected)
    }

    @Test("answering fills the named inputs and keeps authId and everything else")
    func answering() throws {
        let step = try #require(
            JourneyStep(json(stepJSON(namePasswordCallbacks, stage: "UsernamePassword")).objectValue!))
        #expect(step.stage == "UsernamePassword")
        let body = try step.answered(json(#"{"IDToken1":"demo","IDToken2":"pw"}"#).objectValue!).get()
        #expect(body["authId"] == "auth-1")
        #expect(body["stage"] == "UsernamePassword")
        let inputs = body["callbacks"]?.arrayValue?.compactMap { $0["input"]?.arrayValue?.first?["value"] }
        #expect(inputs == ["demo", "pw"])
    }

    @Test("an answer naming no input fails and lists the step's inputs")
    func unknownAnswer() throws {
        let step = try #require(JourneyStep(json(stepJSON(namePasswordCallbacks)).objectValue!))
        let result = step.answered(json(#"{"IDToken3":"x"}"#).objectValue!)
        #expect(
            result
                == .failure(
                    JourneyAnswerError(
                        message: #"No input of this step is named "IDToken3"; its inputs are "IDToken1", "IDToken2"."#))
        )
    }

    @Test("the offered step never carries the authId")
    func noAuthId() throws {
        let step = try #require(
            JourneyStep(json(stepJSON(namePasswordCallbacks, authId: "SECRET-AUTH-ID")).objectValue!))
        let node = JourneyNode.next(step).json(journey: "Login", step: "s1", user: nil)
        #expect(!node.serialized().contains("SECRET-AUTH-ID"))
        #expect(node["node"] == "continue")
        #expect(node["step"] == "s1")
        #expect(node["callbacks"]?.arrayValue?.count == 2)
    }

    @Test("a step with only a polling wait is polled by the proxy; one with a question is not")
    func polling() throws {
        let poll = try #require(
            JourneyStep(
                json(
                    stepJSON(
                        #"[{"type":"PollingWaitCallback","output":[{"name":"waitTime","value":"1500"},{"name":"message","value":"Waiting"}]}]"#
                    )
                ).objectValue!))
        #expect(poll.isPollingOnly)
        #expect(poll.pollingWaitMs == 1500)
        let mixed = try #require(
            JourneyStep(
                json(
                    stepJSON(
                        #"[{"type":"PollingWaitCallback","output":[{"name":"waitTime","value":"1500"}]},{"type":"ConfirmationCallback","output":[],"input":[{"name":"IDToken2","value":0}]}]"#
                    )
                ).objectValue!))
        #expect(!mixed.isPollingOnly)
    }
}
