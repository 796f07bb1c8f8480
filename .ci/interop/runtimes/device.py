"""One device on the mock push service's gateway: connects as TOKEN, counts the pushes whose
alert starts with PREFIX, and prints the count when it has EXPECTED or TIMEOUT seconds passed."""
import asyncio, json, sys
import aiohttp

async def main(url, prefix, expected, timeout, ready_file):
    seen = 0
    async with aiohttp.ClientSession() as session:
        async with session.ws_connect(url) as ws:
            open(ready_file, "w").close()
            try:
                async with asyncio.timeout(timeout):
                    async for message in ws:
                        if message.type == aiohttp.WSMsgType.TEXT and prefix in message.data:
                            seen += 1
                            if seen >= expected:
                                break
            except TimeoutError:
                pass
    print(seen)

asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), sys.argv[5]))
