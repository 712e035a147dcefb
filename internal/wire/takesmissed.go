package wire

// TakesMissedHeader is the Connect request header with which
// agentassistant-mcp says, on AskQuestion, TaskFinish and WorkReport, that
// it takes the answers given while no call of its waited
// (SrvAgentAssistControl.TakeMissedAnswers) and re-attaches to its
// requests: such a request stays pending when the call drops. A call
// without it (upstream's agentassistant-mcp) has no way back to an answer
// given after it went away, so its request is withdrawn when it drops, as
// upstream's server does, and every device is told. Only TakesMissedYes
// says yes: any other value is a caller without that way back.
const TakesMissedHeader = "Agentassistant-Takes-Missed-Answers"

// TakesMissedYes is the value of TakesMissedHeader that says yes.
const TakesMissedYes = "1"
