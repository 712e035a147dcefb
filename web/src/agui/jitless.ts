// @ag-ui's schemas (zod) compile their checks with new Function when
// they can, and probe for it as they are built, when @ag-ui/core loads:
// the page's policy forbids eval and reports the probe as a violation
// even though zod falls back. Imported before @ag-ui, so zod checks
// without it from the start.
import { config } from 'zod'

config({ jitless: true })
