"""Helpers of the dashboard's browser tests: a fresh page, signing in, screenshots, and the
page's script errors."""

from __future__ import annotations

from pathlib import Path

from playwright.sync_api import Browser, Page


def new_page(browser: Browser) -> Page:
    """A page in a context of its own: an empty sessionStorage, so no token yet."""
    return browser.new_page(viewport={"width": 1400, "height": 900})


def shot(page: Page, directory: Path, name: str) -> None:
    page.screenshot(path=str(directory / f"{name}.png"), full_page=True)


def sign_in(page: Page, token: str) -> None:
    page.fill("#token", token)
    page.click("#sign-in button[type=submit]")


def script_errors(page: Page) -> list[str]:
    """The page's uncaught script errors from now on (a list that grows)."""
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    return errors
