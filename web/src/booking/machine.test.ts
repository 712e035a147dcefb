import { describe, expect, it } from 'vitest'
import { Booking, type Catalog } from './machine'

const catalog: Catalog = {
  cinema: 'Test Cinema',
  currency: 'EUR',
  movies: [{ id: 'm1', title: 'Alpha' }, { id: 'm2', title: 'Beta' }],
  dates: [{ id: 'd1', label: 'Fri' }],
  showtimes: [
    { id: 't1', movieId: 'm1', dateId: 'd1', time: '19:00' },
    { id: 't2', movieId: 'm2', dateId: 'd1', time: '21:00' },
  ],
  prices: { standard: 10 },
  seatMap: { rows: ['A', 'B'], seatsPerRow: 3, taken: { t1: ['A2'] } },
}

function book() {
  return new Booking(catalog, () => 1000)
}

describe('Booking', () => {
  it("names the agent's item as the screen does", () => {
    const b = book()
    b.apply('select', { itemId: 'm2' }, 'agent', 'They asked for **Beta**.')
    expect(b.uiSpec().lastAgentAction).toEqual({ tool: 'select', itemId: 'm2', itemLabel: 'Beta', reason: 'They asked for **Beta**.', at: 1000 })
    b.apply('next', {}, 'agent', 'on')
    expect(b.uiSpec().lastAgentAction).toMatchObject({ tool: 'next', itemId: undefined, itemLabel: undefined })
  })

  it('walks the whole flow', () => {
    const b = book()
    expect(b.apply('select', { itemId: 'm1' }, 'agent', 'r')).toEqual({ ok: true, withSpec: true })
    expect(b.apply('next')).toEqual({ ok: true, withSpec: false })
    expect(b.stage).toBe('date')
    b.apply('select', { itemId: 'd1' })
    b.apply('next')
    expect(b.items().map((i) => i.id)).toEqual(['t1']) // only the chosen movie's showtimes
    b.apply('select', { itemId: 't1' })
    b.apply('next')
    expect(b.allowedTools()).toEqual(['setQuantity', 'next', 'prev', 'postMessage'])
    b.apply('setQuantity', { quantity: 2 })
    b.apply('next')
    expect(b.apply('select', { itemId: 'A2' })).toMatchObject({ ok: false, code: 'TOOL_EXECUTION_FAILED' })
    b.apply('select', { itemId: 'A1' })
    b.apply('select', { itemId: 'B3' })
    expect(b.apply('select', { itemId: 'B1' })).toMatchObject({ ok: false, code: 'TOOL_EXECUTION_FAILED' })
    b.apply('next')
    expect(b.stage).toBe('confirm')
    expect(b.uiSpec().total).toBe('20.00 EUR')
    b.apply('next')
    expect(b.stage).toBe('done')
    expect(b.booked).toBe(true)
    expect(b.bookingRef).toMatch(/^BK-/)
    expect(b.allowedTools()).toEqual(['postMessage'])
  })

  it('refuses with the protocol codes', () => {
    const b = book()
    expect(b.apply('fly')).toMatchObject({ ok: false, code: 'UNKNOWN_TOOL' })
    const r = b.apply('setQuantity', { quantity: 1 })
    expect(r).toMatchObject({ ok: false, code: 'UNKNOWN_TOOL' })
    expect(r.ok ? '' : r.message).toContain('allowed now: select, next, postMessage')
    expect(b.apply('select', {})).toMatchObject({ ok: false, code: 'INVALID_PARAMS' })
    expect(b.apply('select', { itemId: 'nope' })).toMatchObject({ ok: false, code: 'INVALID_PARAMS' })
    expect(b.apply('next')).toMatchObject({ ok: false, code: 'TOOL_EXECUTION_FAILED', message: 'select a movie first' })
    expect(b.apply('prev')).toMatchObject({ ok: false, code: 'UNKNOWN_TOOL' }) // not offered on the first step
    expect(b.apply('postMessage', { text: ' ' })).toMatchObject({ ok: false, code: 'INVALID_PARAMS' })
    b.stage = 'tickets'
    expect(b.apply('setQuantity', { quantity: -1 })).toMatchObject({ ok: false, code: 'INVALID_PARAMS', message: 'setQuantity requires quantity >= 0 (an integer)' })
    expect(b.apply('setQuantity', { quantity: 1.5 })).toMatchObject({ ok: false, code: 'INVALID_PARAMS' })
    expect(b.apply('setQuantity', { quantity: 99 })).toMatchObject({ ok: false, code: 'INVALID_PARAMS' })
  })

  it('publishes a stage-filtered toolSchema and keeps backend data out of uiSpec', () => {
    const b = book()
    expect(b.toolSchema().map((t) => t.name)).toEqual(['select', 'next', 'postMessage'])
    for (const t of b.toolSchema()) expect(t.parameters.type).toBe('object')
    const spec = JSON.stringify(b.uiSpec())
    expect(spec).not.toContain('backendData')
    expect(spec).not.toContain('"prices"')
    expect(spec).not.toContain('seatMap')
    expect(b.backendData().seatMap.taken.t1).toEqual(['A2'])
  })

  it('records the agent action with its reason, not the user one', () => {
    const b = book()
    b.apply('select', { itemId: 'm2' }, 'agent', 'shorter film')
    expect(b.uiSpec().lastAgentAction).toEqual({ tool: 'select', itemId: 'm2', itemLabel: 'Beta', reason: 'shorter film', at: 1000 })
    b.apply('select', { itemId: 'm1' }, 'user')
    expect(b.lastAgentAction?.itemId).toBe('m2')
  })

  it('changing an earlier choice clears what depends on it', () => {
    const b = book()
    b.apply('select', { itemId: 'm1' })
    b.apply('next')
    b.apply('select', { itemId: 'd1' })
    b.apply('prev')
    b.apply('select', { itemId: 'm2' })
    expect(b.date).toBe('')
  })

  it('reset returns to the start', () => {
    const b = book()
    b.apply('select', { itemId: 'm1' })
    b.say('user', 'hi')
    b.reset()
    expect(b.stage).toBe('movie')
    expect(b.movie).toBe('')
    expect(b.messages).toEqual([])
  })
})
