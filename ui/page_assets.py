"""The page's own CSS and script (passed to ``gr.Blocks(css=..., head=...)``).

- The monitor column stays in view while the form scrolls (``position: sticky``).
- Help texts are 14 px in #4b5563 on white (contrast 7.6:1; WCAG AA asks 4.5:1 for normal text),
  #d1d5db on Gradio's dark background.
- A refusal notice (``ui.refusals``) outlines the widgets it names: the script opens the form
  sections listed in ``data-sections``, marks ``data-fields`` with ``field-invalid`` and scrolls the
  first into view; a cleared notice clears the marks.
- The monitor's clocks before a run's first step (``.tick[data-seconds]``) count up every second.
- Gradio's elapsed-time counters run at one frame a second, not sixty (an idle page's main cost).
- An optional number box left unset (placeholder ``UNSET_NUMBER``) shows empty, not Gradio's 0.
"""

UNSET_NUMBER = "empty"  # the placeholder of an optional number box (default None): its help says what empty means

CSS = """
.gradio-container { overflow: clip !important; }  /* hidden would make it a scroll box: no sticky inside */
#monitor-col [data-testid="status-tracker"] { display: none !important; }  /* no queue / ETA overlay on the monitor */
#monitor-col { position: sticky; top: 8px; align-self: flex-start; max-height: calc(100vh - 16px);
               overflow-y: auto; flex-wrap: nowrap !important; }  /* wrap would push items off to the right */
#monitor-col > * { flex-shrink: 0 !important; }  /* a long pre-flight report scrolls the column, never squeezes the charts */
.toast-wrap { top: auto !important; bottom: 16px !important; }  /* toasts below, not over the buttons and notice */
button:disabled { opacity: 0.45 !important; filter: grayscale(1); cursor: not-allowed; }
.info-text { font-size: 14px !important; color: #4b5563 !important; line-height: 1.4 !important; }
.dark .info-text { color: #d1d5db !important; }
.field-invalid { outline: 3px solid #b91c1c !important; outline-offset: 2px; border-radius: 8px; }
.refusal { background: #fef2f2; color: #7f1d1d; border: 1px solid #fca5a5; border-radius: 6px;
           padding: 8px 12px; font-size: 15px; }
.placeholder-warning { background: #fffbeb; color: #78350f; border: 1px solid #fcd34d; border-radius: 6px;
                       padding: 8px 12px; }
#hardware { font-size: 14px; }
/* Tables fit their box (issue 27: columns were cut at 1280 px): the browser's own table layout over
   the block's width, long ids and paths broken anywhere, instead of Gradio's widths in pixels. */
.fit-table table { width: 100% !important; table-layout: auto !important; }
.fit-table th, .fit-table td { width: auto !important; min-width: 0 !important; max-width: none !important;
                               overflow-wrap: anywhere; word-break: normal; white-space: normal !important; }
.fit-table .cell-wrap, .fit-table .header-content { white-space: normal !important; }
.fit-table th, .fit-table th * { overflow-wrap: normal !important; word-break: normal !important; }  /* headers: whole words */
.fit-table td, .fit-table th, .fit-table td *, .fit-table th * { font-size: 14px !important; }
.fit-table th:first-child, .fit-table td:first-child { min-width: 3em !important; }
progress.run-progress { width: 100%; height: 10px; accent-color: #f97316; }
#monitor-col button, #runs-actions button, .task-buttons button { white-space: nowrap; }  /* one line each at 1280 px */
#monitor-col button { padding-left: 8px !important; padding-right: 8px !important; min-width: 0 !important;
                      flex: 1 1 auto !important; }  /* each as wide as its words, the rest shared */
.preflight table { font-size: 14px; border-collapse: collapse; margin: 6px 0; }
.preflight td, .preflight th { border: 1px solid #e5e7eb; padding: 2px 6px; text-align: left; }
.pf-issues { list-style: none; padding-left: 0; }
.pf-error { background: #fef2f2; color: #7f1d1d; border: 1px solid #fca5a5; border-radius: 6px; padding: 4px 8px; margin: 4px 0; }
.pf-warning { background: #fffbeb; color: #78350f; border: 1px solid #fcd34d; border-radius: 6px; padding: 4px 8px; margin: 4px 0; }
.pf-sample pre { white-space: pre-wrap; font-size: 13px; max-height: 220px; overflow-y: auto; }
.pf-trained { background: #bbf7d0; color: #14532d; }
.pf-masked { color: #6b7280; }
.pf-basis { color: #4b5563; font-size: 13px; }
"""

SCRIPT = """
<script>
(() => {
  let scheduled = false;
  const mark = () => {
    scheduled = false;
    // An optional number box (placeholder UNSET_NUMBER) left unset shows empty, as its help says:
    // Gradio 6.31 draws its None as 0 (the handlers read 0 there as unset too).
    for (const box of document.querySelectorAll('input[type=number][placeholder="__UNSET__"]')) {
      if (box.value === '0' && document.activeElement !== box) box.value = '';
    }
    const boxes = [...document.querySelectorAll('.refusal[data-fields]')].filter(b => b.offsetParent !== null);
    const wanted = new Set(boxes.flatMap(b => b.dataset.fields.split(' ').filter(Boolean)));
    document.querySelectorAll('.field-invalid').forEach(e => { if (!wanted.has(e.id)) e.classList.remove('field-invalid'); });
    for (const box of boxes) {
      if (box.dataset.opened !== '1') {
        box.dataset.opened = '1';
        for (const id of box.dataset.sections.split(' ').filter(Boolean)) {
          const section = document.getElementById(id);
          const content = section && section.querySelector('[data-testid="accordion-content"]');
          if (content && content.style.display === 'none') section.querySelector('button.label-wrap').click();
        }
      }
      let first = null;
      for (const id of box.dataset.fields.split(' ').filter(Boolean)) {
        const el = document.getElementById(id);
        if (el) { el.classList.add('field-invalid'); first = first || el; }
      }
      if (first && box.dataset.scrolled !== '1') {
        box.dataset.scrolled = '1';
        first.scrollIntoView({block: 'center'});
      }
    }
  };
  new MutationObserver(() => { if (!scheduled) { scheduled = true; requestAnimationFrame(mark); } })
    .observe(document.documentElement, {childList: true, subtree: true});
  // The monitor's clocks before the first step (ui.monitor_text.ticking): each counts up from the seconds
  // it was rendered with, from the moment this page first saw it, until an update replaces it.
  const clock = s => { const m = Math.floor(s / 60), h = Math.floor(m / 60), two = n => String(n).padStart(2, '0');
    return h ? `${h}h ${two(m % 60)}m ${two(Math.floor(s) % 60)}s` : `${m}m ${two(Math.floor(s) % 60)}s`; };
  setInterval(() => {
    const now = performance.now();
    for (const tick of document.querySelectorAll('.tick[data-seconds]')) {
      if (!tick.dataset.seen) tick.dataset.seen = String(now);
      tick.textContent = clock(parseFloat(tick.dataset.seconds) + (now - parseFloat(tick.dataset.seen)) / 1000);
    }
  }, 1000);
})();
</script>
""".replace("__UNSET__", UNSET_NUMBER)

EARLY_SCRIPT = """<script>
(() => {
  // Gradio's status trackers count an event's elapsed seconds on requestAnimationFrame, and the page's
  // own loading tracker keeps counting after the page has loaded (Gradio 6.31): a frame drawn 60 times
  // a second on an idle page, most of its CPU (issue 53, bench/idle_page.py). Those counters (their
  // callbacks read performance.now() and divide by 1e3) get one frame a second; every other caller
  // (charts, transitions) keeps the browser's pace. Served first in <head> (api.page_guard), before Gradio's
  // modules read requestAnimationFrame.
  const frame = window.requestAnimationFrame.bind(window);
  const counter = cb => { const s = String(cb); return s.length < 200 && s.includes('performance.now()') && s.includes('/1e3'); };
  window.requestAnimationFrame = cb => counter(cb) ? window.setTimeout(() => frame(cb), 1000) : frame(cb);
})();
</script>"""
