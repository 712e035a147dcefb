import { describe, expect, it } from 'vitest'
import { deviceLabels } from './devices'

const u = (clientId: string, nickname: string) => ({ clientId, nickname, connectedAt: 0 })

describe('deviceLabels', () => {
  it('names a device by its nickname, a typing PC without its mark', () => {
    const l = deviceLabels([u('aaaa1111', 'Phone'), u('bbbb2222', '⌨ PC input (desk)')], 'Laptop')
    expect(l).toEqual({ aaaa1111: 'Phone', bbbb2222: 'desk' })
  })

  it('tells apart two devices that show the same name, with a short id', () => {
    // A device renamed "⌨ PC input (desk)" next to the real one: both
    // read "desk" and must not look the same.
    const l = deviceLabels([u('aaaa1111ffff', '⌨ PC input (desk)'), u('bbbb2222ffff', '⌨ desk')], 'Laptop')
    expect(l.aaaa1111ffff).not.toEqual(l.bbbb2222ffff)
    expect(l.aaaa1111ffff).toContain('desk')
    expect(l.aaaa1111ffff).toContain('aaaa')
    expect(l.bbbb2222ffff).toContain('bbbb')
  })

  it('tells a device apart from this one when they share a name', () => {
    const l = deviceLabels([u('cccc3333', 'Laptop')], 'Laptop')
    expect(l.cccc3333).not.toEqual('Laptop')
    expect(l.cccc3333).toContain('cccc')
  })

  it('leaves unique names alone even when case and spaces differ only', () => {
    const l = deviceLabels([u('a1', 'Phone'), u('b2', ' phone ')], 'X')
    expect(l.a1).not.toEqual(l.b2)
  })
})
