"""The keeper's tool: a plain Python function, as an ADK user writes it."""


def get_stock(shop: str) -> dict:
    """Looks up the stock of a shop.

    Args:
      shop: the shop's name.
    """
    return {"shop": shop, "stock": "pears 3, apples 12, figs 0"}
