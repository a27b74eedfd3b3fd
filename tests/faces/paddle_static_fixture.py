"""The fixture Paddle's static-mode tests share: static mode on, a fresh main and startup program under
program_guard, dygraph again after the test."""
import pytest


@pytest.fixture
def static():
    import globaltensor.paddle as paddle
    paddle.enable_static()
    main, startup = paddle.static.Program(), paddle.static.Program()
    with paddle.static.program_guard(main, startup):
        yield paddle, main, startup
    paddle.disable_static()
