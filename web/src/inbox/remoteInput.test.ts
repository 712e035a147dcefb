import { describe, expect, it } from 'vitest'
import { answerTone, control, isInputCompanion, pcName } from './remoteInput'

describe('remote input', () => {
  it('knows a companion by the mark at the start of its nickname', () => {
    expect(isInputCompanion('⌨ PC input (desk)')).toBe(true)
    expect(isInputCompanion('PC-ab12')).toBe(false)
    expect(isInputCompanion('my ⌨ phone')).toBe(false)
    expect(pcName('⌨ PC input (desk)')).toBe('desk')
    expect(pcName('⌨ laptop')).toBe('laptop')
    expect(pcName('phone')).toBe('phone')
  })
  it('sends commands in the form the companion reads (ESC + "input:" + verb)', () => {
    expect(control('undo')).toBe('\x1binput:undo')
    expect(control('clear')).toBe('\x1binput:clear')
    expect(control('enter')).toBe('\x1binput:enter')
  })
  it('tells how an answer went', () => {
    expect(answerTone('✓ typed 5 characters')).toBe('ok')
    expect(answerTone('✗ could not type: xdotool was not found')).toBe('failed')
    expect(answerTone('nothing to undo')).toBe('info')
  })
})
