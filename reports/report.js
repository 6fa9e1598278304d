/* report.js: draws the charts of a loadlaw report page from the JSON in
 * <script id="ll-data">, with the Chart.js (v3/v4 API) inlined before it.
 * It is embedded into the binary at build time (embed.cmake) and then into
 * every page, so pages open offline.
 *
 * For tests and for people: every chart that is created records itself in
 * document.body.dataset.charts = {"drawn": n, "expected": m, "charts":
 * [{"id", "points", "drawn"}]} after Chart.js has drawn it (a chart with
 * no data is replaced by a note and not counted), and any script
 * error lands in #ll-errors and document.body.dataset.errors. */
(function () {
  'use strict';
  var errors = [];
  function noteError(msg) {
    errors.push(String(msg));
    document.body.dataset.errors = JSON.stringify(errors);
    var box = document.getElementById('ll-errors');
    if (box) {
      box.style.display = 'block';
      box.textContent = 'script error: ' + errors.join(' | ');
    }
  }
  window.addEventListener('error', function (e) { noteError(e.message || e); });

  var state = { drawn: 0, expected: 0, charts: [] };
  function publish() { document.body.dataset.charts = JSON.stringify(state); }

  var COL = {
    a: '#2563eb', b: '#dc2626', fit: '#111827', asym: '#6b7280', steady: '#2563eb',
    other: 'rgba(148,163,184,0.45)', engine: '#f59e0b', band: 'rgba(37,99,235,0.15)',
    think: '#9333ea', answer: '#059669', prefill: '#f97316', decode: '#2563eb',
    ramp: 'rgba(249,115,22,0.12)', window: 'rgba(5,150,105,0.07)', ttft: '#2563eb', ttfa: '#9333ea',
    itl: '#059669'
  };

  /* Shaded x ranges (the ramp, steady windows): options.plugins.llShade.ranges. */
  var shadePlugin = {
    id: 'llShade',
    beforeDatasetsDraw: function (chart, args, opts) {
      if (!opts || !opts.ranges) return;
      var x = chart.scales.x, area = chart.chartArea, ctx = chart.ctx;
      ctx.save();
      opts.ranges.forEach(function (r) {
        var x0 = Math.max(area.left, x.getPixelForValue(r[0]));
        var x1 = Math.min(area.right, x.getPixelForValue(r[1]));
        if (x1 > x0) {
          ctx.fillStyle = r[2];
          ctx.fillRect(x0, area.top, x1 - x0, area.bottom - area.top);
        }
      });
      ctx.restore();
    }
  };
  /* Marks a chart as drawn once Chart.js has rendered it with data. */
  var drawnPlugin = {
    id: 'llDrawn',
    afterDraw: function (chart) {
      var rec = chart.$llRec;
      if (rec && !rec.drawn) {
        rec.drawn = true;
        state.drawn++;
        publish();
      }
    }
  };

  function countPoints(cfg) {
    var n = 0;
    cfg.data.datasets.forEach(function (d) { if (!d.llGuide) n += (d.data || []).length; });
    return n;
  }

  function makeChart(id, cfg) {
    var canvas = document.getElementById(id);
    if (!canvas) return null;
    cfg.options = cfg.options || {};
    cfg.options.animation = false;
    cfg.options.responsive = true;
    cfg.options.maintainAspectRatio = false;
    cfg.options.plugins = cfg.options.plugins || {};
    cfg.plugins = (cfg.plugins || []).concat([shadePlugin, drawnPlugin]);
    var rec = { id: id, points: countPoints(cfg), drawn: false };
    if (rec.points === 0) {
      /* nothing measured to draw: say so instead of an empty frame */
      var note = document.createElement('div');
      note.className = 'muted nodata';
      note.textContent = (cfg.options.plugins.title && cfg.options.plugins.title.text || id) +
        ': no data in this run';
      canvas.parentNode.replaceChild(note, canvas);
      return null;
    }
    state.charts.push(rec);
    state.expected++;
    publish();
    try {
      var ch = new Chart(canvas.getContext('2d'), cfg);
      ch.$llRec = rec;
      ch.draw();
      return ch;
    } catch (e) {
      noteError(id + ': ' + (e && e.message ? e.message : e));
      return null;
    }
  }

  function linAxis(title, extra) {
    var a = { type: 'linear', title: { display: true, text: title }, grid: { color: '#eef2f7' } };
    for (var k in extra || {}) a[k] = extra[k];
    return a;
  }
  function fmt(x, d) { return x == null || !isFinite(x) ? '–' : Number(x).toFixed(d); }
  function pts(arr) { return (arr || []).map(function (p) { return { x: p[0], y: p[1] }; }); }

  /* ---- run report ------------------------------------------------------- */

  function lawCurve(a, b, xmax, scale) {
    var out = [];
    for (var i = 0; i <= 120; i++) {
      var n = xmax * i / 120;
      out.push({ x: n, y: scale ? (n > 0 ? 1000 * n / (a + b * n) : 0) : a + b * n });
    }
    return out;
  }

  function throughputChart(d, id, runs) {
    var ds = [], xmax = 1;
    runs.forEach(function (r) {
      r.levels.forEach(function (L) { xmax = Math.max(xmax, L.c); });
    });
    xmax *= 1.15;
    var amax = 0;
    runs.forEach(function (r) {
      var steady = r.levels.filter(function (L) { return L.steady_tok_per_s != null; })
        .map(function (L) { return { x: L.c, y: L.steady_tok_per_s }; });
      var whole = r.levels.filter(function (L) { return L.whole_tok_per_s != null; })
        .map(function (L) { return { x: L.c, y: L.whole_tok_per_s }; });
      ds.push({ type: 'scatter', label: r.label + 'steady throughput', data: steady, backgroundColor: r.color,
                borderColor: r.color, pointRadius: 5 });
      ds.push({ type: 'scatter', label: r.label + 'whole-level throughput', data: whole, borderColor: r.color,
                backgroundColor: 'rgba(255,255,255,0)', pointStyle: 'rectRot', pointRadius: 4 });
      if (r.law && r.law.ok && r.law.b > 0) {
        ds.push({ type: 'line', label: r.label + 'fit N/(a+bN)', data: lawCurve(r.law.a, r.law.b, xmax, true),
                  borderColor: r.color, borderWidth: 2, pointRadius: 0, llGuide: true });
        var asym = 1000 / r.law.b;
        amax = Math.max(amax, asym);
        ds.push({ type: 'line', label: r.label + 'asymptote 1/b = ' + fmt(asym, 1) + ' tok/s',
                  data: [{ x: 0, y: asym }, { x: xmax, y: asym }], borderColor: r.color, borderDash: [6, 4],
                  borderWidth: 1, pointRadius: 0, llGuide: true });
      }
    });
    return makeChart(id, {
      data: { datasets: ds },
      options: {
        scales: { x: linAxis('concurrency N', { min: 0, max: Math.ceil(xmax) }),
                  y: linAxis('tokens/s', { min: 0 }) },
        plugins: { title: { display: true, text: 'Throughput against concurrency' } }
      }
    });
  }

  function stepChart(d, id) {
    var law = d.law, ds = [];
    var xmax = 1;
    (d.samples.steady || []).concat(d.samples.other || []).forEach(function (p) { xmax = Math.max(xmax, p[0]); });
    d.levels.forEach(function (L) { xmax = Math.max(xmax, L.c); });
    xmax *= 1.05;
    if (law && law.ok) {
      /* band computed in C (fit_law_mean_ci): t * sqrt(var a + N^2 var b + 2N cov ab) */
      var lo = [], hi = [];
      (law.band || []).forEach(function (p) {
        lo.push({ x: p[0], y: p[1] });
        hi.push({ x: p[0], y: p[2] });
      });
      ds.push({ type: 'line', label: '95% confidence band of the mean line', data: lo, borderWidth: 0,
                pointRadius: 0, fill: false, llGuide: true, backgroundColor: COL.band });
      ds.push({ type: 'line', label: '', data: hi, borderWidth: 0, pointRadius: 0, fill: '-1',
                backgroundColor: COL.band, llGuide: true });
      ds.push({ type: 'line', label: 'fit ' + fmt(law.a, 2) + ' + ' + fmt(law.b, 3) + '·N ms',
                data: lawCurve(law.a, law.b, xmax, false), borderColor: COL.fit, borderWidth: 2, pointRadius: 0,
                llGuide: true });
    }
    ds.push({ type: 'scatter', label: 'steady samples', data: pts(d.samples.steady), backgroundColor: COL.steady,
              pointRadius: 2 });
    if (d.samples.other && d.samples.other.length)
      ds.push({ type: 'scatter', label: 'ramp / unsteady samples', data: pts(d.samples.other),
                backgroundColor: COL.other, pointRadius: 1.5 });
    if (d.engine_steps && d.engine_steps.length)
      ds.push({ type: 'scatter', label: "engine's own steps", data: pts(d.engine_steps),
                backgroundColor: COL.engine, pointStyle: 'triangle', pointRadius: 3 });
    var ys = (d.samples.steady || []).map(function (p) { return p[1]; }).sort(function (a, b) { return a - b; });
    var ymax = ys.length ? ys[Math.floor(ys.length * 0.995)] * 1.4 : undefined;
    if (ymax) { var mag = Math.pow(10, Math.floor(Math.log10(ymax))); ymax = Math.ceil(ymax / mag * 2) * mag / 2; }
    return makeChart(id, {
      data: { datasets: ds },
      options: {
        scales: { x: linAxis('decoding requests N', { min: 0 }),
                  y: linAxis('step time, ms per token', { min: 0, max: ymax }) },
        plugins: { title: { display: true, text: 'Step time against N' },
                   legend: { labels: { filter: function (it) { return it.text !== ''; } } } }
      }
    });
  }

  /* ---- what the model sees (report_model.c computes every number) ------ */

  /* Short to long context per request, colour-blind safe (plasma). */
  var KCOL = ['#0d0887', '#6a00a8', '#b12a90', '#e16462', '#fca636'];
  function kBins(mv) {
    var e = mv.k_edges || [];
    return e.length === 6 && e[5] > e[0] ? e : null;
  }
  function kBinOf(edges, kr) {
    if (!edges) return 0;
    for (var j = 4; j > 0; j--) if (kr >= edges[j]) return j;
    return 0;
  }
  function kLabel(edges, j) {
    return edges ? 'K/N ' + fmt(edges[j], 0) + '–' + fmt(edges[j + 1], 0) + ' tok' : 'steady samples';
  }
  /* Scatter datasets of rows binned by K/N (row[2]); x, y picked from each row. */
  function kScatter(mv, xi, yi) {
    var edges = kBins(mv), groups = [];
    (mv.points || []).forEach(function (p) {
      if (p[xi] == null || p[yi] == null) return;
      var j = kBinOf(edges, p[2]);
      (groups[j] = groups[j] || []).push({ x: p[xi], y: p[yi] });
    });
    var ds = [];
    groups.forEach(function (g, j) {
      if (g) ds.push({ type: 'scatter', label: kLabel(edges, j), data: g, backgroundColor: KCOL[j], pointRadius: 2 });
    });
    return ds;
  }
  function yTop(vals) {
    vals.sort(function (a, b) { return a - b; });
    var y = vals.length ? vals[Math.floor(vals.length * 0.995)] * 1.4 : undefined;
    if (y) { var mag = Math.pow(10, Math.floor(Math.log10(y))); y = Math.ceil(y / mag * 2) * mag / 2; }
    return y;
  }

  function modelChart(d, id) {
    var mv = d.model_view;
    if (!mv) return null;
    var edges = kBins(mv), ds = [];
    (mv.lines || []).forEach(function (l) {
      var col = mv.has_k ? KCOL[kBinOf(edges, l.k_per_req)] : COL.fit;
      ds.push({ type: 'line', data: pts(l.pts), borderColor: col, borderWidth: 2, pointRadius: 0, llGuide: true,
                label: mv.has_k ? 'model at K/N = ' + fmt(l.k_per_req, 0) + ' tok (p' + fmt(100 * l.q, 0) + ')'
                                : 'model (' + mv.model + '): ' + mv.formula + ' ms' });
    });
    ds = ds.concat(kScatter(mv, 0, 1));
    return makeChart(id, {
      data: { datasets: ds },
      options: {
        scales: { x: linAxis('decoding requests N', { min: 0 }),
                  y: linAxis('step time, ms per token', { min: 0,
                    max: yTop((mv.points || []).map(function (p) { return p[1]; })) }) },
        plugins: { title: { display: true, text: 'Step time against N, coloured by context per request (K/N)' },
                   subtitle: { display: true, text: 'chosen model: ' + mv.model + ', ' + mv.formula + ' ms' } }
      }
    });
  }

  function residChart(d, id, xi, xtitle) {
    var mv = d.model_view;
    if (!mv) return null;
    var ds = kScatter(mv, xi, 4), xmax = 0;
    (mv.points || []).forEach(function (p) { if (p[xi] != null) xmax = Math.max(xmax, p[xi]); });
    ds.unshift({ type: 'line', label: '', data: [{ x: 0, y: 0 }, { x: xmax, y: 0 }], borderColor: COL.fit,
                 borderWidth: 1, pointRadius: 0, llGuide: true });
    return makeChart(id, {
      data: { datasets: ds },
      options: {
        scales: { x: linAxis(xtitle, { min: 0 }), y: linAxis('measured − model, ms per token') },
        plugins: { title: { display: true, text: 'Residuals against ' + (xi === 0 ? 'N' : 'K') },
                   legend: { labels: { filter: function (it) { return it.text !== ''; } } } }
      }
    });
  }

  /* A level's mean step by position in the request (fit_level_position). */
  function positionChart(L, i) {
    var p = L.position;
    if (!p) return null;
    return makeChart('pos-' + i, {
      type: 'line',
      data: { datasets: [
        { label: 'steady steps' + (L.c > 0 ? ' at N = C' : ''), data: pts(p.steady), borderColor: COL.steady,
          backgroundColor: COL.steady, pointRadius: 3, borderWidth: 2 },
        { label: 'every step (prefill shared too)', data: pts(p.all), borderColor: COL.prefill,
          backgroundColor: COL.prefill, pointRadius: 2, borderWidth: 1.5, borderDash: [4, 3] }
      ] },
      options: {
        scales: { x: linAxis('tokens the request had received', { min: 0 }),
                  y: linAxis('mean step, ms per token', { min: 0 }) },
        plugins: { title: { display: true, text: 'C=' + L.c + ': step against position in the request' } }
      }
    });
  }

  /* Text beside points: a dataset's llLabels[i] next to its i-th point. */
  var labelPlugin = {
    id: 'llLabels',
    afterDatasetsDraw: function (chart) {
      var ctx = chart.ctx;
      ctx.save();
      ctx.font = '11px ' + Chart.defaults.font.family;
      ctx.fillStyle = '#374151';
      ctx.textBaseline = 'middle';
      chart.data.datasets.forEach(function (d, k) {
        if (!d.llLabels || !chart.isDatasetVisible(k)) return;
        var dy = d.llLabelDy || -8;
        chart.getDatasetMeta(k).data.forEach(function (el, i) {
          var t = d.llLabels[i];
          if (!t) return;
          /* near the right edge the text goes to the point's left */
          var w = ctx.measureText(t).width, x = el.x + 7;
          if (x + w > chart.chartArea.right) x = el.x - 7 - w;
          ctx.fillText(t, x, el.y + dy);
        });
      });
      ctx.restore();
    }
  };

  /* Per-user against total tokens/s (report_pareto.c computes every number:
   * the law's curve and band from `loadlaw plan`, the points, the goodput
   * flags); this only draws them. */
  function paretoChart(d, id) {
    var p = d.pareto;
    if (!p) return null;
    var ds = [], xmax = 0;
    var solid = [], dashed = [], lo = [], hi = [];
    (p.curve || []).forEach(function (q) {
      if (q.tok_per_s == null || q.user_tok_per_s == null) return;
      var pt = { x: q.tok_per_s, y: q.user_tok_per_s, c: q.c };
      (q.extrapolated ? dashed : solid).push(pt);
      xmax = Math.max(xmax, q.tok_per_s);
      /* the band's slow edge (step at its upper end) and fast edge */
      if (q.tok_per_s_ci[0] != null && q.user_tok_per_s_ci[0] != null &&
          q.tok_per_s_ci[1] != null && q.user_tok_per_s_ci[1] != null) {
        lo.push({ x: q.tok_per_s_ci[0], y: q.user_tok_per_s_ci[0], c: q.c });
        hi.push({ x: q.tok_per_s_ci[1], y: q.user_tok_per_s_ci[1], c: q.c });
      }
    });
    if (solid.length && dashed.length) dashed.unshift(solid[solid.length - 1]);
    if (lo.length) {
      ds.push({ type: 'line', label: "law's 95% band", data: lo, borderWidth: 0, pointRadius: 0, fill: false,
                backgroundColor: COL.band, llGuide: true });
      ds.push({ type: 'line', label: '', data: hi, borderWidth: 0, pointRadius: 0, fill: '-1',
                backgroundColor: COL.band, llGuide: true });
    }
    if (solid.length)
      ds.push({ type: 'line', label: 'law, C = 1..' + p.max_measured_c + ' (measured range)', data: solid,
                borderColor: COL.fit, borderWidth: 2, pointRadius: 0, llGuide: true });
    if (dashed.length) {
      var cEnd = dashed[dashed.length - 1].c;
      ds.push({ type: 'line', label: (solid.length ? 'law beyond C = ' + p.max_measured_c :
                                      'law (no closed-loop C measured)') + ', extrapolated to C = ' + cEnd,
                data: dashed, borderColor: COL.fit, borderDash: [6, 4], borderWidth: 2, pointRadius: 0,
                llGuide: true, llLabelDy: 12,
                llLabels: dashed.map(function (q, i) { return i === dashed.length - 1 ? 'C=' + cEnd : ''; }) });
    }
    var groups = {};
    (p.points || []).forEach(function (q) {
      xmax = Math.max(xmax, q.tok_per_s);
      var open = q.mode === 'open';
      var key = (open ? 'open' : 'closed') + (q.meets === true ? '+' : q.meets === false ? '-' : '');
      var g = groups[key];
      if (!g) {
        var col = q.meets === true ? COL.answer : q.meets === false ? COL.b : COL.a;
        g = groups[key] = {
          type: 'scatter', data: [], llLabels: [], backgroundColor: col, borderColor: col,
          pointStyle: open ? 'triangle' : 'circle', pointRadius: 6, pointHoverRadius: 8,
          label: (open ? 'open-loop levels' : 'measured levels (closed loop)') +
            (q.meets === true ? ': meet every objective' : q.meets === false ? ': miss an objective' : '')
        };
      }
      g.data.push({ x: q.tok_per_s, y: q.user_tok_per_s, c: q.c });
      var name = open ? (q.rate_per_s != null ? q.rate_per_s + ' req/s' : 'open') : 'C=' + q.c;
      if (q.good_frac != null) name += ' (' + fmt(100 * q.good_frac, 0) + '% good)';
      if (q.best) name += ' best goodput';
      g.llLabels.push(name);
    });
    ['closed', 'closed+', 'closed-', 'open', 'open+', 'open-'].forEach(function (k) {
      if (groups[k]) ds.push(groups[k]);
    });
    xmax = xmax > 0 ? xmax * 1.05 : 1;
    var mag = Math.pow(10, Math.floor(Math.log10(xmax)));
    xmax = Math.ceil(xmax / mag * 2) * mag / 2;
    var ob = p.objectives;
    if (ob && ob.user_tok_per_s_min != null) {
      var txt = 'ITL/TPOT ≤ ' + fmt(ob.tpot_ms, 1) + ' ms: ≥ ' + fmt(ob.user_tok_per_s_min, 2) + ' tok/s per user';
      if (ob.max_c && ob.max_c.n != null)
        txt += ' (law: max C = ' + ob.max_c.n + ', 95% [' + fmt(ob.max_c.n_ci[0], 0) + ', ' +
          (ob.max_c.n_ci[1] == null ? '∞' : fmt(ob.max_c.n_ci[1], 0)) + ']' +
          (ob.max_c.extrapolated ? ', extrapolated' : '') + ')';
      ds.push({ type: 'line', label: txt,
                data: [{ x: 0, y: ob.user_tok_per_s_min }, { x: xmax, y: ob.user_tok_per_s_min }],
                borderColor: COL.b, borderDash: [3, 3], borderWidth: 1.5, pointRadius: 0, llGuide: true });
    }
    return makeChart(id, {
      data: { datasets: ds },
      plugins: [labelPlugin],
      options: {
        scales: { x: linAxis('total output tokens/s', { min: 0, max: xmax }),
                  y: linAxis('per-user tokens/s (one stream, steady decode)', { min: 0 }) },
        plugins: {
          title: { display: true, text: 'Per-user against total tokens/s' },
          subtitle: { display: !!p.no_curve, text: p.no_curve ? 'no law curve: ' + p.no_curve : '' },
          legend: { labels: { filter: function (it) { return it.text !== ''; } } },
          tooltip: { callbacks: { label: function (c) {
            var r = c.raw || {};
            return (r.c ? 'C=' + r.c + ': ' : '') + fmt(c.parsed.x, 1) + ' tok/s total, ' +
              fmt(c.parsed.y, 2) + ' tok/s per user';
          } } }
        }
      }
    });
  }

  function levelCharts(L, i) {
    positionChart(L, i);
    var shade = [];
    (L.windows || []).forEach(function (w) { shade.push([w[0], w[1], COL.window]); });
    if (L.ramp) shade.push([L.ramp[0], L.ramp[1], COL.ramp]);
    var xr = { min: 0, max: L.duration_s };
    var P = (L.phase || []).map(function (p) { return { x: p[0], y: p[1] }; });
    var D = (L.phase || []).map(function (p) { return { x: p[0], y: p[2] }; });
    makeChart('tl-' + i, {
      type: 'line',
      data: { datasets: [
        { label: 'prefilling P(t)', data: P, stepped: true, borderColor: COL.prefill, pointRadius: 0, borderWidth: 1.5 },
        { label: 'decoding D(t)', data: D, stepped: true, borderColor: COL.decode, pointRadius: 0, borderWidth: 1.5 }
      ] },
      options: {
        scales: { x: linAxis('seconds into the level', xr), y: linAxis('requests', { min: 0 }) },
        plugins: { llShade: { ranges: shade },
                   title: { display: true, text: 'C=' + L.c + ': requests prefilling and decoding (ramp shaded orange, steady windows green)' } }
      }
    });
    if (L.rate && L.rate.think && L.rate.think.length) {
      var th = [], an = [];
      for (var k = 0; k < L.rate.think.length; k++) {
        var t = L.rate.t0_s + (k + 0.5) * L.rate.bin_s;
        th.push({ x: t, y: L.rate.think[k] });
        an.push({ x: t, y: L.rate.answer[k] });
      }
      makeChart('rate-' + i, {
        type: 'line',
        data: { datasets: [
          { label: 'thinking tokens/s', data: th, borderColor: COL.think, backgroundColor: 'rgba(147,51,234,0.15)',
            fill: true, pointRadius: 0, borderWidth: 1.5 },
          { label: 'answer tokens/s', data: an, borderColor: COL.answer, backgroundColor: 'rgba(5,150,105,0.15)',
            fill: true, pointRadius: 0, borderWidth: 1.5 }
        ] },
        options: {
          scales: { x: linAxis('seconds into the level', xr), y: linAxis('tokens/s', { min: 0 }) },
          plugins: { llShade: { ranges: shade },
                     title: { display: true, text: 'C=' + L.c + ': token rate, thinking and answer' } }
        }
      });
    }
    var ds = [];
    [['ttft', 'TTFT'], ['ttfa', 'TTFA'], ['itl', 'ITL']].forEach(function (k) {
      var cdf = L.cdf && L.cdf[k[0]];
      if (cdf && cdf.length)
        ds.push({ label: k[1], data: pts(cdf), borderColor: COL[k[0]], pointRadius: 0, borderWidth: 2, stepped: true });
    });
    /* start the log axis near the 1st percentile so a few near-zero gaps
     * (chunks that arrived in one read) do not squash the distribution */
    var xmin;
    ds.forEach(function (d) {
      for (var k = 0; k < d.data.length; k++)
        if (d.data[k].y >= 0.01) { xmin = xmin === undefined ? d.data[k].x : Math.min(xmin, d.data[k].x); break; }
    });
    if (ds.length)
      makeChart('dist-' + i, {
        type: 'line',
        data: { datasets: ds },
        options: {
          scales: { x: linAxis('milliseconds (log)', { type: 'logarithmic', min: xmin ? xmin / 1.5 : undefined }),
                    y: linAxis('fraction of samples ≤ x', { min: 0, max: 1 }) },
          plugins: { title: { display: true, text: 'C=' + L.c + ': TTFT, TTFA and ITL distributions (CDF)' } }
        }
      });
  }

  /* ---- comparison page -------------------------------------------------- */

  function ratioChart(d, id) {
    var pt = [], lo = [], hi = [];
    d.compare.levels.forEach(function (L) {
      if (L.ratio == null) return;
      pt.push({ x: L.concurrency, y: L.ratio });
      lo.push({ x: L.concurrency, y: L.ratio_ci[0] });
      hi.push({ x: L.concurrency, y: L.ratio_ci[1] });
    });
    return makeChart(id, {
      type: 'line',
      data: { datasets: [
        { label: '95% interval', data: lo, borderWidth: 0, pointRadius: 0, backgroundColor: COL.band, llGuide: true },
        { label: '', data: hi, borderWidth: 0, pointRadius: 0, fill: '-1', backgroundColor: COL.band, llGuide: true },
        { label: 'speedup B/A (steady throughput)', data: pt, borderColor: COL.fit, backgroundColor: COL.fit,
          pointRadius: 4 }
      ] },
      options: {
        scales: { x: linAxis('concurrency N', { min: 0 }), y: linAxis('B / A', { min: 0 }) },
        plugins: { title: { display: true, text: 'Speedup per level' },
                   legend: { labels: { filter: function (it) { return it.text !== ''; } } } }
      }
    });
  }

  function compareStepChart(d, id) {
    var ds = [], xmax = 1;
    d.runs.forEach(function (r) { r.levels.forEach(function (L) { xmax = Math.max(xmax, L.c); }); });
    xmax *= 1.1;
    d.runs.forEach(function (r) {
      ds.push({ type: 'scatter', label: r.label + 'steady samples', data: pts(r.samples), backgroundColor: r.color,
                pointRadius: 2 });
      if (r.law && r.law.ok)
        ds.push({ type: 'line', label: r.label + fmt(r.law.a, 2) + ' + ' + fmt(r.law.b, 3) + '·N ms',
                  data: lawCurve(r.law.a, r.law.b, xmax, false), borderColor: r.color, borderWidth: 2,
                  pointRadius: 0, llGuide: true });
    });
    return makeChart(id, {
      data: { datasets: ds },
      options: {
        scales: { x: linAxis('decoding requests N', { min: 0 }), y: linAxis('step time, ms per token', { min: 0 }) },
        plugins: { title: { display: true, text: 'Step time against N, both runs' } }
      }
    });
  }

  function main() {
    var el = document.getElementById('ll-data');
    if (!el) { noteError('no data block'); return; }
    var d = JSON.parse(el.textContent);
    if (typeof Chart === 'undefined') { noteError('Chart.js did not load'); return; }
    Chart.defaults.font.family = 'system-ui, -apple-system, "Segoe UI", Roboto, sans-serif';
    Chart.defaults.font.size = 12;
    if (d.kind === 'run') {
      throughputChart(d, 'chart-throughput', [{ label: '', color: COL.a, levels: d.levels, law: d.law }]);
      stepChart(d, 'chart-step');
      modelChart(d, 'chart-model');
      residChart(d, 'chart-resid-n', 0, 'decoding requests N');
      residChart(d, 'chart-resid-k', 3, 'K, context tokens of the running requests');
      paretoChart(d, 'chart-pareto');
      d.levels.forEach(levelCharts);
    } else if (d.kind === 'compare') {
      d.runs[0].color = COL.a;
      d.runs[1].color = COL.b;
      throughputChart(d, 'chart-throughput', d.runs);
      compareStepChart(d, 'chart-step');
      ratioChart(d, 'chart-ratio');
    }
    publish();
  }
  try { main(); } catch (e) { noteError(e && e.stack ? e.stack : e); }
})();
