"""The bit inspector as an ipywidgets UI: a value box and a log slider kept in step, one toggle
button per format, and the table of ``render.to_html`` below them."""

from __future__ import annotations

import html
import math

import ipywidgets as widgets

from .bits import INSPECTED_FORMATS
from .render import to_html

# The slider spans |value| from 1e-9 (below fp16's subnormals) to 1e6 (beyond fp16's max).
SLIDER_DECADES = (-9, 6)


class BitInspector:
    """The widget; ``ui`` is what to display. Typing a value moves the slider to its magnitude
    (when it is in the slider's range), and dragging the slider sets the box, keeping the sign."""

    def __init__(self, value: float = 0.1, formats=INSPECTED_FORMATS):
        self.box = widgets.Text(
            value=f"{float(value)!r}",
            description="value",
            continuous_update=False,  # inspect on Enter or when the box loses focus
            placeholder="0.1, 65520, 1e-8, -0.0, inf, nan",
        )
        low, high = SLIDER_DECADES
        self.slider = widgets.FloatLogSlider(
            value=1.0,
            base=10,
            min=low,
            max=high,
            step=0.001,  # fine enough that the readout (3 digits) matches the box
            description="|value|",
            readout_format=".3g",  # the slider's position; the box holds the exact value
        )
        self.buttons = {
            name: widgets.ToggleButton(
                value=name in formats,
                description=name,
                tooltip=f"show or hide {name}",
                layout=widgets.Layout(width="auto"),
            )
            for name in INSPECTED_FORMATS
        }
        for button in self.buttons.values():
            self._mark(button)
        self.table = widgets.HTML()
        self.ui = widgets.VBox(
            [
                widgets.HBox([self.box, self.slider]),
                widgets.HBox([widgets.Label("formats"), *self.buttons.values()]),
                self.table,
            ]
        )
        self._syncing = False  # set while one control updates the other
        self.box.observe(self._typed, names="value")
        self.slider.observe(self._dragged, names="value")
        for button in self.buttons.values():
            button.observe(self._toggled, names="value")
        self._typed({"new": self.box.value})

    @staticmethod
    def _mark(button) -> None:
        """An on button is filled and ticked, an off one plain: the state reads at a glance."""
        button.button_style = "info" if button.value else ""
        button.icon = "check" if button.value else ""

    def _toggled(self, change) -> None:
        self._mark(change["owner"])
        self.render()

    @property
    def formats(self) -> list[str]:
        """The formats switched on, in the inspector's order."""
        return [name for name, button in self.buttons.items() if button.value]

    def value(self) -> float | None:
        """The number in the box, or None when it is not one."""
        try:
            return float(self.box.value)
        except ValueError:
            return None

    def render(self) -> None:
        value = self.value()
        if value is None:
            self.table.value = (
                f"<p><b>{html.escape(self.box.value)}</b> is not a number: type one such as "
                "0.1, 65520, 1e-8, -0.0, inf or nan.</p>"
            )
        elif not self.formats:
            self.table.value = "<p>Switch on at least one format.</p>"
        else:
            self.table.value = to_html(value, self.formats)

    def _typed(self, change) -> None:
        self.render()
        magnitude = abs(self.value() or 0.0)
        low, high = (10.0**d for d in SLIDER_DECADES)
        if self._syncing or not (low <= magnitude <= high):
            return  # zero, inf, nan and values beyond the slider leave it where it is
        self._syncing = True
        try:
            self.slider.value = magnitude
        finally:
            self._syncing = False

    def _dragged(self, change) -> None:
        if self._syncing:
            return
        typed = self.value()
        if typed and math.isfinite(typed):
            # The browser snaps a typed magnitude to the slider's grid (steps of 10^0.001) and
            # sends it back: that echo must not overwrite the exact value in the box.
            if abs(math.log10(change["new"]) - math.log10(abs(typed))) <= self.slider.step / 2:
                return
        sign = -1.0 if typed is not None and math.copysign(1.0, typed) < 0 else 1.0
        self._syncing = True
        try:
            self.box.value = f"{sign * change['new']:.6g}"
        finally:
            self._syncing = False
