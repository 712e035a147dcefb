// Remote input: agentassistant-input -listen joins /ws as a device whose
// nickname starts with ⌨ and types every chat message sent to it into the
// focused window of its PC. A chat that starts with CONTROL_PREFIX is a
// command for it, never text (the prefix begins with Escape, which no one
// can type into a chat box and the companion never types).

export const NICK_MARK = '⌨'
export const CONTROL_PREFIX = '\u001binput:'

// What the chat with a companion can ask of it besides typing.
export type Verb = 'undo' | 'clear' | 'enter'

export function isInputCompanion(nickname: string): boolean {
  return nickname.startsWith(NICK_MARK)
}

// pcName is what to call the companion's PC: its nickname without the
// mark, and the host name alone from the default "PC input (host)".
export function pcName(nickname: string): string {
  const n = nickname.startsWith(NICK_MARK) ? nickname.slice(NICK_MARK.length).trim() : nickname
  return /^PC input \((.+)\)$/.exec(n)?.[1] ?? n
}

export function control(verb: Verb): string {
  return CONTROL_PREFIX + verb
}

// The companion answers every message with "✓ …" when it went through,
// "✗ …" when it did not, and plain words when there was nothing to do.
export function answerTone(text: string): 'ok' | 'failed' | 'info' {
  return text.startsWith('✓') ? 'ok' : text.startsWith('✗') ? 'failed' : 'info'
}
