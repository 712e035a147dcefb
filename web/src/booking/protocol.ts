// mvp-0.2 envelopes: what the host sends and accepts on /agent/ws.
export const VERSION = 'mvp-0.2'

export interface Envelope {
  v: string
  type: string
  id?: string
  replyTo?: string
  payload: Record<string, unknown>
}

export function envelope(type: string, payload: Record<string, unknown> = {}, ids: { id?: string; replyTo?: string } = {}): string {
  const e: Envelope = { v: VERSION, type, payload }
  if (ids.id) e.id = ids.id
  if (ids.replyTo) e.replyTo = ids.replyTo
  return JSON.stringify(e)
}

// parseEnvelope returns the envelope, or null for anything that is not a
// well-formed mvp-0.2 envelope (the relay already checked; this guards the
// page against anything else).
export function parseEnvelope(data: unknown): Envelope | null {
  if (typeof data !== 'string') return null
  let e: unknown
  try {
    e = JSON.parse(data)
  } catch {
    return null
  }
  if (!e || typeof e !== 'object') return null
  const o = e as Record<string, unknown>
  if (o.v !== VERSION || typeof o.type !== 'string' || !o.type) return null
  const payload = o.payload && typeof o.payload === 'object' && !Array.isArray(o.payload) ? (o.payload as Record<string, unknown>) : {}
  return {
    v: VERSION,
    type: o.type,
    id: typeof o.id === 'string' ? o.id : undefined,
    replyTo: typeof o.replyTo === 'string' ? o.replyTo : undefined,
    payload,
  }
}
