// The inbox scrolls the window under a fixed header and a fixed reply bar.
// A question scrolled to must land between the two, and stay there while
// the page settles: the bar grows once it has a question to answer, the
// layout pads the page for it a frame later, images load. It stays pinned
// until the person scrolls on their own.

export type Target = string | 'end' // a request id, or the end of the list

const MARGIN = 12 // clear of the highlight's outline

export class Revealer {
  private pinned: Target | '' = ''
  private ro = new ResizeObserver(() => this.fit())
  private unpin = () => (this.pinned = '')
  private onKey = (e: KeyboardEvent) => {
    const t = e.target as HTMLElement | null
    if (t?.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(t?.tagName ?? '')) return
    if (/^(PageUp|PageDown|ArrowUp|ArrowDown|Home|End| )$/.test(e.key)) this.unpin()
  }
  private onPointer = (e: PointerEvent) => {
    if (e.target === document.documentElement) this.unpin() // the window's scrollbar
  }

  constructor(private bars: { header: () => Element | null; footer: () => Element | null }) {}

  start() {
    this.ro.observe(document.documentElement, { box: 'border-box' })
    const f = this.bars.footer()
    if (f) this.ro.observe(f, { box: 'border-box' })
    window.addEventListener('wheel', this.unpin, { passive: true })
    window.addEventListener('touchmove', this.unpin, { passive: true })
    window.addEventListener('keydown', this.onKey)
    window.addEventListener('pointerdown', this.onPointer)
  }

  stop() {
    this.ro.disconnect()
    window.removeEventListener('wheel', this.unpin)
    window.removeEventListener('touchmove', this.unpin)
    window.removeEventListener('keydown', this.onKey)
    window.removeEventListener('pointerdown', this.onPointer)
  }

  // reveal scrolls to target now (call it after the DOM has it) and keeps
  // it in view as the page settles.
  reveal(target: Target) {
    this.pinned = target
    this.fit()
  }

  private fit() {
    const p = this.pinned
    if (!p) return
    const top = (this.bars.header()?.getBoundingClientRect().bottom ?? 0) + MARGIN
    const bottom = (this.bars.footer()?.getBoundingClientRect().top ?? window.innerHeight) - MARGIN
    if (p === 'end') {
      const max = document.documentElement.scrollHeight - window.innerHeight
      if (window.scrollY < max - 1) window.scrollTo({ top: max, behavior: 'instant' })
      return
    }
    const el = document.querySelector(`[data-request-id="${CSS.escape(p)}"]`)
    if (!el) return
    const r = el.getBoundingClientRect()
    let dy = 0
    if (r.height > bottom - top) dy = r.top - top // taller than the room: show its beginning
    else if (r.bottom > bottom) dy = r.bottom - bottom
    else if (r.top < top) dy = r.top - top
    if (Math.abs(dy) >= 1) window.scrollBy({ top: dy, behavior: 'instant' })
  }
}
