// How a newcomer connects an agent, as the empty inbox shows it: Claude
// Code's command to register this server's /mcp endpoint. The page knows
// its own address and the token, so the command is the one to run; the
// token is hidden on the screen (someone behind the person reads it off
// as easily as they do) and whole in the copy.

// HIDDEN stands for the token on the screen: the same for every token, so
// it says nothing of its length either.
export const HIDDEN = '••••••••'

// CLIENTS_GUIDE is the guide for the other clients. The server does not
// serve docs/: the project's site has it, where a phone opens it too.
export const CLIENTS_GUIDE = 'https://github.com/agentassistant/agentassistant/blob/main/docs/clients.md#register-it-in-your-client'

// shellWord quotes a word for a POSIX shell, PowerShell and fish alike
// when it holds no single quote (a generated token never does); one that
// does is closed, escaped and reopened, as POSIX shells read it.
function shellWord(s: string): string {
  return /^[\w@%+=:,./-]+$/.test(s) ? s : `'${s.replace(/'/g, `'\\''`)}'`
}

// claudeCommand is the command that registers the server at origin with
// Claude Code over HTTP; a null or empty token is shown as HIDDEN.
export function claudeCommand(origin: string, token: string | null): string {
  const header = `Authorization: Bearer ${token || HIDDEN}`
  return ['claude', 'mcp', 'add', '--transport', 'http', 'agentassistant', shellWord(origin + '/mcp'), '--header', shellWord(header)].join(' ')
}
