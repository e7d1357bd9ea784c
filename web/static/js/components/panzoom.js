// Pan and zoom of an SVG group: drag or scroll pans, ctrl+scroll (and a trackpad pinch) zooms
// around the pointer. A drag that moved swallows the click that ends it.

/** Zoom by a factor around a point, the scale kept within 0.05-3. */
export function zoomAt(tf, factor, cx, cy) {
  const k = Math.min(3, Math.max(0.05, tf.k * factor));
  return { x: cx - (cx - tf.x) * (k / tf.k), y: cy - (cy - tf.y) * (k / tf.k), k };
}

/** Wire pan and zoom on svg, moving viewport; returns {tf, apply, zoomBy, moved, dragged, destroy}. */
export function createPanZoom(svg, viewport) {
  const pz = {
    tf: { x: 0, y: 0, k: 1 },
    userMoved: false,        // panned or zoomed since the level was drawn
    suppressClick: false,
    apply() { viewport.setAttribute('transform', `translate(${pz.tf.x},${pz.tf.y}) scale(${pz.tf.k})`); },
    zoomBy(f, cx, cy) {
      const r = svg.getBoundingClientRect();
      pz.userMoved = true;
      pz.tf = zoomAt(pz.tf, f, cx ?? r.width / 2, cy ?? r.height / 2);
      pz.apply();
    },
    destroy() {
      window.removeEventListener('pointermove', onMove);
      window.removeEventListener('pointerup', onUp);
    },
  };
  svg.addEventListener('wheel', (e) => {
    e.preventDefault();
    pz.userMoved = true;
    if (e.ctrlKey || e.metaKey) {
      const r = svg.getBoundingClientRect();
      pz.zoomBy(Math.exp(-e.deltaY * 0.004), e.clientX - r.left, e.clientY - r.top);
    } else {
      pz.tf.x -= e.shiftKey ? e.deltaY : e.deltaX;
      pz.tf.y -= e.shiftKey ? 0 : e.deltaY;
      pz.apply();
    }
  }, { passive: false });
  let drag = null;
  svg.addEventListener('pointerdown', (e) => {
    if (e.button === 0) drag = { x: e.clientX, y: e.clientY, tx: pz.tf.x, ty: pz.tf.y, moved: false };
  });
  function onMove(e) {
    if (!drag) return;
    const dx = e.clientX - drag.x, dy = e.clientY - drag.y;
    if (!drag.moved && Math.hypot(dx, dy) < 4) return;
    if (!drag.moved) { drag.moved = true; pz.userMoved = true; svg.classList.add('panning'); }
    pz.tf.x = drag.tx + dx; pz.tf.y = drag.ty + dy;
    pz.apply();
  }
  function onUp() {
    if (drag && drag.moved) {
      svg.classList.remove('panning');
      pz.suppressClick = true;
      setTimeout(() => { pz.suppressClick = false; }, 0);
    }
    drag = null;
  }
  window.addEventListener('pointermove', onMove);
  window.addEventListener('pointerup', onUp);
  return pz;
}
