// The movie-booking flow as a pure state machine: the same transitions
// whether the participant clicks or the agent calls a tool. The relay host
// (relay.ts) publishes uiSpec/toolSchema from it and executes tool calls on it.

export const STAGES = ['movie', 'date', 'showtime', 'tickets', 'seats', 'confirm', 'done'] as const
export type Stage = (typeof STAGES)[number]

export interface Catalog {
  cinema: string
  currency: string
  movies: { id: string; title: string; genre?: string; durationMin?: number; rating?: string; description?: string }[]
  dates: { id: string; label: string }[]
  showtimes: { id: string; movieId: string; dateId: string; time: string; hall?: string }[]
  prices: Record<string, number>
  seatMap: { rows: string[]; seatsPerRow: number; taken: Record<string, string[]> }
  maxTickets?: number
}

export interface ChatMessage {
  role: 'user' | 'agent' | 'system'
  text: string
  at: number
}

export interface AgentAction {
  tool: string
  itemId?: string
  itemLabel?: string // what the screen calls the item: a movie's title, a date, a seat
  reason: string
  at: number
}

export type Source = 'user' | 'agent' | 'host'

export interface ToolDef {
  name: string
  description: string
  parameters: { type: 'object'; properties: Record<string, unknown>; required?: string[] }
}

export type ToolOutcome =
  | { ok: true; withSpec: boolean }
  | { ok: false; code: 'UNKNOWN_TOOL' | 'INVALID_PARAMS' | 'TOOL_EXECUTION_FAILED' | 'NO_ACTIVE_SPEC'; message: string }

const TOOLS: Record<string, ToolDef> = {
  select: {
    name: 'select',
    description: 'Select an item on the current step by its id: a movie, a date, a showtime, or a seat (selecting a chosen seat again releases it).',
    parameters: { type: 'object', properties: { itemId: { type: 'string', description: 'The id of a visible item (uiSpec.items[].id).' } }, required: ['itemId'] },
  },
  setQuantity: {
    name: 'setQuantity',
    description: 'Set the number of tickets.',
    parameters: { type: 'object', properties: { quantity: { type: 'integer', minimum: 0, description: 'Number of tickets.' } }, required: ['quantity'] },
  },
  next: {
    name: 'next',
    description: 'Go to the next step once the current one is complete; on the confirm step this books the tickets.',
    parameters: { type: 'object', properties: {} },
  },
  prev: { name: 'prev', description: 'Go back one step.', parameters: { type: 'object', properties: {} } },
  postMessage: {
    name: 'postMessage',
    description: "Post a message in the participant's chat.",
    parameters: { type: 'object', properties: { text: { type: 'string', description: 'The message.' } }, required: ['text'] },
  },
}

const ALLOWED: Record<Stage, string[]> = {
  movie: ['select', 'next', 'postMessage'],
  date: ['select', 'next', 'prev', 'postMessage'],
  showtime: ['select', 'next', 'prev', 'postMessage'],
  tickets: ['setQuantity', 'next', 'prev', 'postMessage'],
  seats: ['select', 'next', 'prev', 'postMessage'],
  confirm: ['next', 'prev', 'postMessage'],
  done: ['postMessage'],
}

export class Booking {
  stage: Stage = 'movie'
  movie = ''
  date = ''
  showtime = ''
  quantity = 0
  seats: string[] = []
  booked = false
  bookingRef = ''
  messages: ChatMessage[] = []
  lastAgentAction: AgentAction | null = null

  constructor(public catalog: Catalog, private now: () => number = Date.now) {}

  reset() {
    this.stage = 'movie'
    this.movie = this.date = this.showtime = this.bookingRef = ''
    this.quantity = 0
    this.seats = []
    this.booked = false
    this.messages = []
    this.lastAgentAction = null
  }

  get maxTickets() {
    return this.catalog.maxTickets ?? 8
  }

  allowedTools(): string[] {
    return ALLOWED[this.stage]
  }

  toolSchema(): ToolDef[] {
    return this.allowedTools().map((n) => TOOLS[n]!)
  }

  // items visible on the current step, with what the screen shows of them.
  items(): { id: string; label: string; detail?: string; selected: boolean; disabled?: boolean }[] {
    const c = this.catalog
    switch (this.stage) {
      case 'movie':
        return c.movies.map((m) => ({
          id: m.id, label: m.title, selected: m.id === this.movie,
          detail: [m.genre, m.durationMin ? `${m.durationMin} min` : '', m.rating].filter(Boolean).join(' · '),
        }))
      case 'date':
        return c.dates.map((d) => ({ id: d.id, label: d.label, selected: d.id === this.date }))
      case 'showtime':
        return c.showtimes
          .filter((s) => s.movieId === this.movie && s.dateId === this.date)
          .map((s) => ({ id: s.id, label: s.time, detail: s.hall, selected: s.id === this.showtime }))
      case 'seats': {
        const taken = new Set(c.seatMap.taken[this.showtime] ?? [])
        const out = []
        for (const r of c.seatMap.rows)
          for (let i = 1; i <= c.seatMap.seatsPerRow; i++) {
            const id = `${r}${i}`
            out.push({ id, label: id, selected: this.seats.includes(id), disabled: taken.has(id) })
          }
        return out
      }
    }
    return []
  }

  unitPrice() {
    return this.catalog.prices.standard ?? Object.values(this.catalog.prices)[0] ?? 0
  }

  total() {
    return Math.round(this.quantity * this.unitPrice() * 100) / 100
  }

  private label(kind: 'movie' | 'date' | 'showtime'): string {
    const c = this.catalog
    if (kind === 'movie') return c.movies.find((m) => m.id === this.movie)?.title ?? ''
    if (kind === 'date') return c.dates.find((d) => d.id === this.date)?.label ?? ''
    return c.showtimes.find((s) => s.id === this.showtime)?.time ?? ''
  }

  // uiSpec is what the participant sees now. Raw backend data (price
  // table, seat map, availability lists) stays in backendData().
  uiSpec() {
    return {
      stage: this.stage,
      step: STAGES.indexOf(this.stage) + 1,
      steps: STAGES.length,
      cinema: this.catalog.cinema,
      items: this.items(),
      selections: {
        movie: this.movie ? { id: this.movie, label: this.label('movie') } : null,
        date: this.date ? { id: this.date, label: this.label('date') } : null,
        showtime: this.showtime ? { id: this.showtime, label: this.label('showtime') } : null,
        seats: [...this.seats],
      },
      quantity: this.quantity,
      total: this.quantity ? `${this.total().toFixed(2)} ${this.catalog.currency}` : '',
      booked: this.booked,
      bookingRef: this.bookingRef,
      lastAgentAction: this.lastAgentAction,
    }
  }

  backendData() {
    return { prices: this.catalog.prices, seatMap: this.catalog.seatMap, showtimes: this.catalog.showtimes }
  }

  // apply runs a tool, from the agent or from a click (source user).
  apply(tool: string, params: Record<string, unknown> = {}, source: Source = 'agent', reason = ''): ToolOutcome {
    if (!TOOLS[tool]) return { ok: false, code: 'UNKNOWN_TOOL', message: `no tool "${tool}"; tools: ${Object.keys(TOOLS).join(', ')}` }
    if (!this.allowedTools().includes(tool))
      return { ok: false, code: 'UNKNOWN_TOOL', message: `${tool} is not available on the ${this.stage} step; allowed now: ${this.allowedTools().join(', ')}` }
    const itemId = typeof params.itemId === 'string' ? params.itemId : undefined
    const itemLabel = itemId ? this.items().find((i) => i.id === itemId)?.label : undefined
    const out = this.run(tool, params)
    if (out.ok && source === 'agent') this.lastAgentAction = { tool, itemId, itemLabel, reason, at: this.now() }
    return out
  }

  private run(tool: string, p: Record<string, unknown>): ToolOutcome {
    const bad = (message: string): ToolOutcome => ({ ok: false, code: 'INVALID_PARAMS', message })
    const fail = (message: string): ToolOutcome => ({ ok: false, code: 'TOOL_EXECUTION_FAILED', message })
    switch (tool) {
      case 'select': {
        if (typeof p.itemId !== 'string' || !p.itemId) return bad('select requires itemId (a string)')
        const item = this.items().find((i) => i.id === p.itemId)
        if (!item) return bad(`no item "${p.itemId}" on the ${this.stage} step; items: ${this.items().map((i) => i.id).join(', ')}`)
        if (this.stage === 'seats') {
          if (item.disabled) return fail(`seat ${item.id} is already taken`)
          const at = this.seats.indexOf(item.id)
          if (at >= 0) this.seats.splice(at, 1)
          else if (this.seats.length >= this.quantity) return fail(`${this.quantity} seat(s) already chosen for ${this.quantity} ticket(s); release one first`)
          else this.seats.push(item.id)
        } else if (this.stage === 'movie') {
          if (this.movie !== item.id) this.date = this.showtime = ''
          this.movie = item.id
        } else if (this.stage === 'date') {
          if (this.date !== item.id) this.showtime = ''
          this.date = item.id
        } else if (this.stage === 'showtime') {
          if (this.showtime !== item.id) this.seats = []
          this.showtime = item.id
        }
        return { ok: true, withSpec: true }
      }
      case 'setQuantity': {
        const q = p.quantity
        if (typeof q !== 'number' || !Number.isInteger(q) || q < 0)
          return bad('setQuantity requires quantity >= 0 (an integer)')
        if (q > this.maxTickets) return bad(`at most ${this.maxTickets} tickets`)
        this.quantity = q
        if (this.seats.length > q) this.seats = this.seats.slice(0, q)
        return { ok: true, withSpec: true }
      }
      case 'next': {
        const need: Partial<Record<Stage, string>> = {
          movie: this.movie ? '' : 'select a movie first',
          date: this.date ? '' : 'select a date first',
          showtime: this.showtime ? '' : 'select a showtime first',
          tickets: this.quantity > 0 ? '' : 'set the number of tickets first',
          seats: this.seats.length === this.quantity ? '' : `select ${this.quantity} seat(s) first (${this.seats.length} chosen)`,
        }
        if (need[this.stage]) return fail(need[this.stage]!)
        if (this.stage === 'confirm') {
          this.booked = true
          this.bookingRef = 'BK-' + Math.abs(hash(`${this.showtime}:${this.seats.join(',')}:${this.now()}`)).toString(36).toUpperCase().slice(0, 6)
        }
        this.stage = STAGES[STAGES.indexOf(this.stage) + 1]!
        return { ok: true, withSpec: false }
      }
      case 'prev':
        if (this.stage === 'movie') return fail('already on the first step')
        this.stage = STAGES[STAGES.indexOf(this.stage) - 1]!
        return { ok: true, withSpec: false }
      case 'postMessage': {
        if (typeof p.text !== 'string' || !p.text.trim()) return bad('postMessage requires text')
        this.messages.push({ role: 'agent', text: p.text, at: this.now() })
        return { ok: true, withSpec: false }
      }
    }
    return fail('not implemented')
  }

  say(role: ChatMessage['role'], text: string) {
    this.messages.push({ role, text, at: this.now() })
  }
}

function hash(s: string) {
  let h = 0
  for (let i = 0; i < s.length; i++) h = (Math.imul(31, h) + s.charCodeAt(i)) | 0
  return h
}
