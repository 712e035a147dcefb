// The person's quick replies: the inbox's one-tap answers and a push
// notification's buttons. Kept on the device; until edited, the
// defaults in the page's language.
const KEY = 'aa.replies'

export const MAX_REPLIES = 8 // what the server takes
export const MAX_REPLY_BYTES = 40

export function loadReplies(): string[] | null {
  try {
    const v = JSON.parse(localStorage.getItem(KEY) ?? 'null') as unknown
    return Array.isArray(v) && v.every((r) => typeof r === 'string') ? cleanReplies(v) : null
  } catch {
    return null
  }
}

export function saveReplies(r: string[] | null) {
  if (r === null) localStorage.removeItem(KEY)
  else localStorage.setItem(KEY, JSON.stringify(cleanReplies(r)))
}

// cleanReplies keeps what the server accepts: at most 8, each 1 to 40
// bytes, without repeats.
export function cleanReplies(r: string[]): string[] {
  const enc = new TextEncoder()
  const out: string[] = []
  for (let s of r) {
    s = s.trim()
    while (enc.encode(s).length > MAX_REPLY_BYTES) s = s.slice(0, -1)
    if (s && !out.includes(s) && out.length < MAX_REPLIES) out.push(s)
  }
  return out
}
