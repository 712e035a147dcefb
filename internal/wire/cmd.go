package wire

// Cmd values of WebsocketMessage on /ws.
const (
	CmdUserLogin                        = "UserLogin"
	CmdAskQuestion                      = "AskQuestion"
	CmdTaskFinish                       = "TaskFinish"
	CmdAskQuestionReply                 = "AskQuestionReply"
	CmdTaskFinishReply                  = "TaskFinishReply"
	CmdAskQuestionReplyNotification     = "AskQuestionReplyNotification"
	CmdTaskFinishReplyNotification      = "TaskFinishReplyNotification"
	CmdCheckMessageValidity             = "CheckMessageValidity"
	CmdGetPendingMessages               = "GetPendingMessages"
	CmdRequestCancelled                 = "RequestCancelled"
	CmdRequestAgentStatus               = "RequestAgentStatus"
	CmdGetOnlineUsers                   = "GetOnlineUsers"
	CmdSendChatMessage                  = "SendChatMessage"
	CmdChatMessageNotification          = "ChatMessageNotification"
	CmdUserConnectionStatusNotification = "UserConnectionStatusNotification"
	CmdSendBackspace                    = "SendBackspace"
	CmdError                            = "Error"
	CmdGetHistory                       = "GetHistory"
	CmdClearHistory                     = "ClearHistory"
	CmdRequestsLost                     = "RequestsLost"
)

// The current upstream generation's names of the TaskFinish Cmds; the
// frames are the same (fields 3 and 5).
const (
	CmdWorkReport                  = "WorkReport"
	CmdWorkReportReply             = "WorkReportReply"
	CmdWorkReportReplyNotification = "WorkReportReplyNotification"
)

// Statuses of UserConnectionStatusNotification. Connected and disconnected
// are the words existing agentassistant clients act on; a rename is
// announced as connected again, with the new nickname. StatusChanged is the
// bare presence notice of big rooms.
const (
	StatusConnected    = "connected"
	StatusDisconnected = "disconnected"
	StatusChanged      = "changed"
)
